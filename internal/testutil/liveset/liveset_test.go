package liveset

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func member(host string, port int) []byte {
	return []byte(`{"serviceEndpoint":{"host":"` + host + `","port":` + itoa(port) + `},"status":"ALIVE"}`)
}

func itoa(i int) string {
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func TestCount(t *testing.T) {
	nodes := []Znode{
		{Name: "member_1", Data: member("10.0.0.1", 8080), Owner: 7},
		{Name: "member_2", Data: member("10.0.0.2", 8080), Owner: 9}, // session gone
		{Name: "member_3", Data: member("10.0.0.3", 8080), Owner: 7}, // pod not Ready
		{Name: "member_4", Data: member("10.0.0.1", 8080), Owner: 7}, // duplicate
		{Name: "member_5", Data: member("10.0.0.4", 8080), Owner: 0}, // persistent
		{Name: "member_6", Data: []byte("garbage"), Owner: 7},        // unparseable
		{Name: "member_7", Data: member("10.0.0.5", 8080), Owner: 8}, // live
		{Name: "member_8", Data: member("10.0.0.5", 9090), Owner: 8}, // wrong port
	}
	ready := map[string]bool{"10.0.0.1:8080": true, "10.0.0.2:8080": true, "10.0.0.4:8080": true, "10.0.0.5:8080": true}
	live, skipped := Count(nodes, map[int64]bool{7: true, 8: true}, ready)
	if live != 2 || len(skipped) != 6 {
		t.Errorf("live %d, skipped %q; want 2 live and 6 skipped", live, skipped)
	}
	// Without a session list, ZooKeeper's own expiry is trusted.
	if live, _ := Count(nodes, nil, ready); live != 3 {
		t.Errorf("without sessions: live %d, want 3", live)
	}
}

func TestTallyCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	tally := func(counts ...int) Summary {
		tl := &Tally{What: "members", Minimum: 2}
		for i, n := range counts {
			var err error
			if n < 0 {
				err = errors.New("connection refused")
			}
			tl.Add(t0.Add(time.Duration(i)*250*time.Millisecond), n, err)
		}
		return tl.Summary()
	}
	many := func(n, v int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		s      Summary
		over   time.Duration
		failed []string
	}{
		{name: "good", s: tally(many(200, 3)...), over: 50 * time.Second},
		{name: "none", s: tally(), over: 50 * time.Second, failed: []string{"0 good sample(s)", "0 of 0 sample(s) errored"}},
		{name: "too few", s: tally(many(100, 3)...), over: 50 * time.Second, failed: []string{"100 good sample(s) over 50s, want at least 150"}},
		{name: "under", s: tally(append(many(199, 3), 1)...), over: 50 * time.Second, failed: []string{"1 sample(s) under the minimum"}},
		{name: "errors", s: tally(append(many(196, 3), -1, -1, -1, -1)...), over: 50 * time.Second, failed: []string{"4 of 200 sample(s) errored"}},
		{name: "1% errors", s: tally(append(many(198, 3), -1, -1)...), over: 50 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.s.Check(tc.over, 3, 0.01)
			if len(got) != len(tc.failed) {
				t.Fatalf("Check = %q, want %d failures like %q", got, len(tc.failed), tc.failed)
			}
			for i, f := range tc.failed {
				if !strings.Contains(got[i], f) {
					t.Errorf("failure %d = %q, want it to say %q", i, got[i], f)
				}
			}
		})
	}
	if s := tally(3, -1, 2); s.Min != 2 || s.Errors != 1 {
		t.Errorf("min %d errors %d, want 2 and 1 (errored samples do not count as 0)", s.Min, s.Errors)
	}
	if s := tally(-1, 4); s.Min != 4 {
		t.Errorf("min %d after a first errored sample, want 4", s.Min)
	}
}

func TestGaps(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ticks            []int
		last             int
		missing, outside []int
	}{
		{name: "complete with repeats", ticks: []int{3, 1, 2, 2}, last: 3},
		{name: "lost middle", ticks: []int{1, 3}, last: 3, missing: []int{2}},
		{name: "lost tail", ticks: []int{1, 2}, last: 4, missing: []int{3, 4}},
		{name: "beyond final", ticks: []int{1, 2, 5}, last: 2, outside: []int{5}},
		{name: "none shipped", last: 2, missing: []int{1, 2}},
		{name: "stopped before its first tick", last: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			missing, outside := Gaps(tc.ticks, tc.last, 10)
			if d := cmp.Diff(tc.missing, missing); d != "" {
				t.Errorf("missing (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.outside, outside); d != "" {
				t.Errorf("outside (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseCons(t *testing.T) {
	// ZooKeeper 3.8's answer: decimal latencies, which go-zookeeper's
	// FLWCons does not parse.
	answer := ` /127.0.0.1:40112[1](queued=0,recved=12,sent=12,sid=0x10000a1b2c30000,lop=PING,est=1764288000000,to=10000,lcxid=0x5,lzxid=0x1a,lresp=1764288001000,llat=0,minlat=0,avglat=0.25,maxlat=1)
 /127.0.0.1:40120[0](queued=0,recved=1,sent=0)

`
	got := map[int64]bool{}
	if err := parseCons(answer, got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0x10000a1b2c30000] {
		t.Errorf("sessions %v, want only 0x10000a1b2c30000", got)
	}
	if err := parseCons("cons is not executed because it is not in the whitelist.\n", map[int64]bool{}); err == nil {
		t.Error("a refused cons must be an error")
	}
}
