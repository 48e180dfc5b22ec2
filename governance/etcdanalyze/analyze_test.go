package etcdanalyze

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

func TestSpaceOf(t *testing.T) {
	for key, want := range map[string]string{
		"/registry/pods/default/web-1":                                   "/registry/pods/default",
		"/registry/namespaces/default":                                   "/registry/namespaces",
		"/registry/apiextensions.k8s.io/customresourcedefinitions/x.y.z": "/registry/apiextensions.k8s.io/customresourcedefinitions",
		"/registry/workloads.trellis.dev/trellisservices/shop/web":       "/registry/workloads.trellis.dev/trellisservices/shop",
		"/registry/masterleases/10.0.0.1":                                "/registry/masterleases",
		"compact_rev_key":                                                "/compact_rev_key",
	} {
		if got := SpaceOf(key); got != want {
			t.Errorf("SpaceOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestIntegrationAnalyzeSnapshot writes objects through the real apiserver
// into the real etcd, takes a snapshot with the etcd client's snapshot API
// (what `etcdctl snapshot save` calls), and analyses it.
func TestIntegrationAnalyzeSnapshot(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	c := cp.Client
	for _, ns := range []string{"alpha", "beta"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", 16384)
	for i := range 10 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "alpha"}, Data: map[string]string{"v": big}}
		if _, err := c.CoreV1().ConfigMaps("alpha").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%d", i), Namespace: "beta"}, Data: map[string]string{"v": "0"}}
		cm, err := c.CoreV1().ConfigMaps("beta").Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if err := c.CoreV1().ConfigMaps("beta").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for j := range 5 {
			cm.Data["v"] = fmt.Sprint(j + 1)
			if cm, err = c.CoreV1().ConfigMaps("beta").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{cp.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	rc, err := ec.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snapshot.db")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	f.Close()

	r, err := Analyze(snap)
	if err != nil {
		t.Fatal(err)
	}
	spaces := map[string]Space{}
	for _, s := range r.Spaces {
		spaces[s.Name] = s
	}
	alpha, beta := spaces["/registry/configmaps/alpha"], spaces["/registry/configmaps/beta"]
	if alpha.Keys != 10 || alpha.Revisions != 10 || alpha.OldBytes != 0 || alpha.LiveBytes < 10*16384 {
		t.Errorf("alpha: %+v, want 10 keys of over 16 KiB, one revision each", alpha)
	}
	// 3 live keys with 6 revisions each, plus a created-then-deleted one
	// (its create and its tombstone).
	if beta.Keys != 3 || beta.Revisions != 3*6+2 || beta.OldBytes == 0 {
		t.Errorf("beta: %+v, want 3 keys, 20 revisions, old bytes > 0", beta)
	}
	if r.Spaces[0].Name != "/registry/configmaps/alpha" {
		t.Errorf("largest key space %s, want /registry/configmaps/alpha", r.Spaces[0].Name)
	}
	var table, folded, svg bytes.Buffer
	if err := r.WriteTable(&table, 10); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "/registry/configmaps/alpha") {
		t.Errorf("table:\n%s", table.String())
	}
	if err := r.WriteFolded(&folded); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(folded.String(), "registry;configmaps;alpha;cm-0 ") {
		t.Errorf("folded stacks lack registry;configmaps;alpha;cm-0:\n%.500s", folded.String())
	}
	if err := r.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	for {
		if _, err := d.Token(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
	}
	if !strings.Contains(svg.String(), "<title>alpha (") {
		t.Error("the flame graph has no alpha frame")
	}
	t.Logf("\n%s", table.String())

	if _, err := Analyze(filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Error("a missing snapshot analysed")
	}
}
