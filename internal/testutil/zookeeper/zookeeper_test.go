package zookeeper

import (
	"testing"
	"time"
)

func TestIntegrationEnsemble(t *testing.T) {
	e := Start(t, 3)
	leader := e.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	e.Kill(leader)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if l := e.Leader(); l >= 0 && l != leader {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no new leader after killing the old one")
}
