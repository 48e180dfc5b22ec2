package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationRolloutsS3 reads the AMI rollout from an S3 state store
// in the AWS API emulator, as the gateway does on AWS (the addon's
// --rollout-state-store=s3://... and --rollout-cluster): the rollouts
// page shows the rollout and its history written there by `trellis ami`'s
// store, and a pause from the page is written back to S3. RBAC is a real
// apiserver's.
func TestIntegrationRolloutsS3(t *testing.T) {
	srv := awsemutest.Start(t)
	ctx := context.Background()
	const bucket = "trellis-console-state"
	if err := awsemu.NewClients(srv.URL, "us-east-1").Bucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	// The kops S3 vfs's settings, as bootstrap.Env sets them for the
	// emulator; on AWS the gateway has its node's instance role instead.
	for k, v := range map[string]string{"S3_ENDPOINT": srv.URL, "S3_REGION": "us-east-1",
		"S3_ACCESS_KEY_ID": "trellis-emulator", "S3_SECRET_ACCESS_KEY": "trellis-emulator", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	writer, err := rollout.NewVFSStore("s3://"+bucket+"/clusters", "dev.example.com")
	must(t, err)
	must(t, writer.Save(ctx, rolloutState()))
	for _, rec := range pastRollouts() {
		must(t, writer.Record(ctx, rec))
	}

	cp := cluster.Start(t, cluster.Options{})
	kc := cp.Client
	_, err = kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rollouts"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{console.RolloutGroup}, Resources: []string{console.RolloutResource}, Verbs: []string{"get"}},
		{APIGroups: []string{console.RolloutGroup}, Resources: []string{console.RolloutControl}, Verbs: []string{"update"}},
	}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rollouts"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rollouts"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:dave@example.com"}},
	}, metav1.CreateOptions{})
	must(t, err)

	// The gateway's own store, opened from the flags' values.
	store, err := rollout.NewVFSStore("s3://"+bucket+"/clusters", "dev.example.com")
	must(t, err)
	if !strings.HasPrefix(store.Path.Path(), "s3://"+bucket+"/clusters/dev.example.com/trellis/ami-rollout") {
		t.Fatalf("store path %s: want the rollout under the cluster's folder in S3", store.Path.Path())
	}
	c, err := console.New(console.Config{API: &fakeAPI{}, SessionKey: []byte(strings.Repeat("k", 32)), Clock: fixedClock{now},
		Access:   gateway.NewAuthorizer(kc.AuthorizationV1().SubjectAccessReviews(), wallClock{}, 0, 0, 100),
		Rollouts: store})
	must(t, err)
	dave, daveTok := signIn(t, c, "oidc:dave@example.com")
	r := do(c, http.MethodGet, "/rollouts", dave, nil)
	for _, want := range []string{"r1764330000", "Running", "batch 2: Drain (1 of 2 drained)", "team-a/web-pdb", `<tr id="h-r1763900000">`, `value="pause"`} {
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, want) {
			t.Fatalf("dave: %d, want 200 with %q from S3:\n%s", r.StatusCode, want, r.Body)
		}
	}
	r = do(c, http.MethodPost, "/rollouts/control", dave, url.Values{"csrf": {daveTok}, "action": {"pause"}})
	if st, err := writer.Load(ctx); err != nil || r.StatusCode != http.StatusSeeOther || st.Status != rollout.StatusPaused {
		t.Fatalf("pause: %d, %v, want 303 and Paused in S3:\n%s", r.StatusCode, err, r.Body)
	}
}
