package main

import (
	"fmt"
	"testing"
)

// The checker is what makes the bench's "exactly once" claim: it must see
// a missing, a duplicated, a reordered and a foreign line.
func TestCheckerCountsEveryFault(t *testing.T) {
	in := input{logs: []podLog{{uid: "u1", container: "app"}, {uid: "u2", container: "app"}}, perFile: 3}
	rec := func(uid string, j int) []byte {
		return fmt.Appendf(nil, `{"log":"GET /api/v1/items/%d 200","uid":%q,"container":"app","service":"s","workload":{"kind":"Deployment","name":"web"},"labels":{"a":"b"}}`, j, uid)
	}
	c := newChecker(in)
	for _, v := range [][]byte{rec("u1", 0), rec("u1", 2), rec("u1", 1), rec("u2", 0), rec("u2", 0), rec("u2", 1), rec("u3", 0), []byte("not json")} {
		c.add(v)
	}
	if got := c.missing(); got != 1 { // u2's line 2
		t.Errorf("missing = %d, want 1", got)
	}
	if c.dup != 1 || c.reordered != 1 || c.foreign != 2 || c.plain != 0 {
		t.Errorf("dup %d reordered %d foreign %d plain %d, want 1 1 2 0", c.dup, c.reordered, c.foreign, c.plain)
	}
	if err := c.report("test", true); err == nil {
		t.Error("report accepted a missing and a duplicated line")
	}

	c = newChecker(in)
	for _, uid := range []string{"u1", "u2"} {
		for j := range 3 {
			c.add(rec(uid, j))
		}
	}
	if err := c.report("test", true); err != nil {
		t.Errorf("every line once: %v", err)
	}
	c.add([]byte(`{"log":"GET /api/v1/items/0 200","uid":"u1","container":"app"}`))
	if c.plain != 1 {
		t.Errorf("a record without labels counted %d times as plain, want 1", c.plain)
	}
	c.add([]byte(`{"log":"GET /api/v1/items/1 200","uid":"u1","container":"app","service":"s","labels":{"a":"b"}}`))
	if c.plain != 2 {
		t.Errorf("a record without its workload counted %d times as plain, want 1", c.plain-1)
	}
}
