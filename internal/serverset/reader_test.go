package serverset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func TestFileWriterShrinkGuard(t *testing.T) {
	w := &FileWriter{Path: filepath.Join(t.TempDir(), "web.json")}
	mk := func(n int) []Member {
		var ms []Member
		for i := range n {
			ms = append(ms, Member{ServiceEndpoint: Endpoint{Host: fmt.Sprintf("10.0.0.%d", i), Port: 80}, Status: StatusAlive})
		}
		return ms
	}
	if err := w.Write(mk(10)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(mk(4)); !errors.Is(err, ErrShrinkRefused) {
		t.Fatalf("10 -> 4: want ErrShrinkRefused, got %v", err)
	}
	var got []Member
	b, _ := os.ReadFile(w.Path)
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 10 {
		t.Fatalf("file after a refused update: %d members (%v)", len(got), err)
	}
	if err := w.Write(mk(5)); err != nil {
		t.Fatalf("10 -> 5 (half): %v", err)
	}
	if err := w.Write(mk(2)); !errors.Is(err, ErrShrinkRefused) {
		t.Fatalf("5 -> 2: want refusal, got %v", err)
	}
	small := &FileWriter{Path: filepath.Join(t.TempDir(), "small.json")}
	if err := small.Write(mk(4)); err != nil {
		t.Fatal(err)
	}
	if err := small.Write(mk(0)); err != nil {
		t.Fatalf("below the guarded size any update goes through: %v", err)
	}
}

func TestIntegrationWatch(t *testing.T) {
	zks := zktest.Start(t, 1)
	r, _, _ := startRegistrar(t, zks.Addrs(), 4*time.Second)
	conn, _, err := zk.Connect(zks.Addrs(), 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := make(chan int, 100)
	go func() {
		_ = Watch(ctx, conn, "/discovery/web/prod", func(ms []Member) error { updates <- len(ms); return nil })
	}()
	wait := func(n int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case got := <-updates:
				if got == n {
					return
				}
			case <-deadline:
				t.Fatalf("no update with %d members", n)
			}
		}
	}
	wait(0)
	_ = r.Set("a", member("10.5.0.1", 80))
	wait(1)
	_ = r.Set("b", member("10.5.0.2", 80))
	wait(2)
	r.Remove("a")
	wait(1)
}
