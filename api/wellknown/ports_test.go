package wellknown_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trellis-dev/trellis/api/wellknown"
)

func TestParsePorts(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []wellknown.Port
		// errs are substrings the error must hold, one per bad entry.
		errs []string
	}{
		{name: "one", in: "http:8080", want: []wellknown.Port{{Name: "http", Port: 8080}}},
		{name: "declaration order", in: "http:8080,admin:9090,grpc:1", want: []wellknown.Port{
			{Name: "http", Port: 8080}, {Name: "admin", Port: 9090}, {Name: "grpc", Port: 1},
		}},
		{name: "spaces around entries", in: " http:8080 , admin : 9090", want: []wellknown.Port{
			{Name: "http", Port: 8080}, {Name: "admin", Port: 9090},
		}},
		{name: "highest port", in: "x:65535", want: []wellknown.Port{{Name: "x", Port: 65535}}},
		{name: "empty", in: "", errs: []string{"no ports"}},
		{name: "blank", in: "  ", errs: []string{"no ports"}},
		{name: "no colon", in: "http", errs: []string{`entry 0 "http": want name:port`}},
		{name: "empty name", in: ":8080", errs: []string{`entry 0 ":8080": empty name`}},
		{name: "not a number", in: "http:80x", errs: []string{`entry 0 "http:80x": port must be`}},
		{name: "zero", in: "http:0", errs: []string{`entry 0 "http:0": port must be`}},
		{name: "negative", in: "http:-1", errs: []string{`entry 0 "http:-1": port must be`}},
		{name: "too high", in: "http:65536", errs: []string{`entry 0 "http:65536": port must be`}},
		{name: "duplicate name", in: "http:80,http:81", errs: []string{`entry 1 "http:81": duplicate name "http"`}},
		{name: "trailing comma", in: "http:80,", errs: []string{`entry 1 "": want name:port`}},
		// A bad first entry must not promote the second to service endpoint.
		{name: "every bad entry, no ports", in: "http:x,admin:9090,:1", errs: []string{
			`entry 0 "http:x": port must be`, `entry 2 ":1": empty name`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wellknown.ParsePorts(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePorts(%q) ports (-want +got):\n%s", tc.in, diff)
			}
			if len(tc.errs) == 0 {
				if err != nil {
					t.Errorf("ParsePorts(%q): unexpected error %v", tc.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParsePorts(%q): no error, want %q", tc.in, tc.errs)
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("ParsePorts(%q) error %q does not say %q", tc.in, err, e)
				}
			}
		})
	}
	if _, err := wellknown.ParsePorts(""); !errors.Is(err, wellknown.ErrNoPorts) {
		t.Errorf("ParsePorts(\"\") = %v, want ErrNoPorts", err)
	}
}
