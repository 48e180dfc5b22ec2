package statestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/trellis-dev/trellis/internal/pki"
)

func TestEnsureIdentityRoot(t *testing.T) {
	ctx := context.Background()
	store := "file://" + t.TempDir()
	if _, err := IdentityRoot(ctx, store, "c1"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("IdentityRoot before creation: %v, want ErrNotExist", err)
	}
	root, created, err := EnsureIdentityRoot(ctx, store, "c1", "trellis.test")
	if err != nil || !created {
		t.Fatalf("EnsureIdentityRoot: %v created=%v", err, created)
	}
	again, created, err := EnsureIdentityRoot(ctx, store, "c1", "trellis.test")
	if err != nil || created || !again.Cert.Equal(root.Cert) {
		t.Fatalf("second EnsureIdentityRoot must return the same root: %v created=%v", err, created)
	}
	for _, f := range []string{"root.pem", "root-key.pem"} {
		if _, err := os.Stat(filepath.Join(store[len("file://"):], "c1", "trellis", "pki", f)); err != nil {
			t.Error(err)
		}
	}
	st, err := pki.IssuerState(root, "trellis.test")
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := data["root-key.pem"]; ok {
		t.Error("the issuer's Secret carries the root key")
	}
	if len(st.Roots) != 1 || !st.Roots[0].Equal(root.Cert) {
		t.Error("the issuer state does not trust the root")
	}
}
