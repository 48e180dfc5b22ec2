package bootstrap

import (
	"context"
	"testing"

	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

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
