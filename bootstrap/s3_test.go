package bootstrap

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// TestIntegrationS3StateStore stores a cluster in an S3 state store served
// in-process by gofakes3 on loopback, through kops's vfs with S3_ENDPOINT, and
// reads it back the same way.
func TestIntegrationS3StateStore(t *testing.T) {
	setupKops(t)
	ctx := context.Background()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	t.Setenv("S3_ENDPOINT", srv.URL)
	t.Setenv("S3_REGION", "us-east-1")
	t.Setenv("S3_ACCESS_KEY_ID", "trellis")
	t.Setenv("S3_SECRET_ACCESS_KEY", "trellis-secret")

	s3c := s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.URL),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("trellis", "trellis-secret", ""),
	})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("trellis-state")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}

	def := loadDef(t, "../clusters/staging-us-west-2.yaml")
	cloud := installFake(t, def)
	state := "s3://trellis-state/clusters"
	var out bytes.Buffer
	if _, err := Create(ctx, def, ApplyOptions{StateStore: state, Yes: true, Out: &out, Cloud: cloud}); err != nil {
		t.Fatalf("create: %v", err)
	}

	cs, err := statestore.Open(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := Stored(ctx, cs, "staging-us-west-2.k8s.trellis.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Cluster.Spec.ConfigStore.Base; got != "s3://trellis-state/clusters/staging-us-west-2.k8s.trellis.example" {
		t.Errorf("configBase = %s", got)
	}
	if len(stored.InstanceGroups) != 2 {
		t.Errorf("want 2 instance groups in S3, got %d", len(stored.InstanceGroups))
	}
	objs, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("trellis-state"), Prefix: aws.String("clusters/staging-us-west-2.k8s.trellis.example/")})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, o := range objs.Contents {
		found[aws.ToString(o.Key)] = true
	}
	for _, k := range []string{"config", "instancegroup/general", "instancegroup/control-plane-us-west-2a", "cluster-completed.spec"} {
		if !found["clusters/staging-us-west-2.k8s.trellis.example/"+k] {
			t.Errorf("object %s missing from the bucket; have %v", k, found)
		}
	}
	// A second definition's groups are listed through the kops client too.
	list, err := cs.InstanceGroupsFor(stored.Cluster).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list via kops client: %v %v", list, err)
	}
}

// TestCreateValidationFailureWritesNothing: a definition kops rejects leaves
// the state store untouched.
func TestCreateValidationFailureWritesNothing(t *testing.T) {
	setupKops(t)
	ctx := context.Background()
	def := loadDef(t, "../clusters/staging-us-west-2.yaml")
	cloud := installFake(t, def)
	def.ControlPlane.MachineType = "t2.invalidType" // the fake rejects it, as AWS would
	_, err := Create(ctx, def, ApplyOptions{StateStore: "memfs://nothing", Yes: true, Cloud: cloud})
	if err == nil {
		t.Fatal("want an error")
	}
	cs, _ := statestore.Open(ctx, "memfs://nothing")
	if _, err := Stored(ctx, cs, "staging-us-west-2.k8s.trellis.example"); err == nil {
		t.Fatalf("cluster was stored despite: %v", err)
	}
}
