package oidcdev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	good := `{"issuer":"http://172.18.0.2:30556","clientID":"c","clientSecret":"s","redirectURIs":["https://h/cb"],"users":[{"id":"dev","password":"p","email":"dev@x"}]}`
	for _, tc := range []struct{ name, body, err string }{
		{"good", good, ""},
		{"unknown field", `{"issuer":"http://h","client":"c"}`, `unknown field "client"`},
		{"bad issuer", strings.Replace(good, "http://172.18.0.2:30556", "ftp://h", 1), `issuer "ftp://h"`},
		{"no redirect", strings.Replace(good, `"https://h/cb"`, "", 1), "redirectURIs"},
		{"user without password", strings.Replace(good, `"password":"p"`, `"password":""`, 1), "users[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := LoadConfig(path)
			if tc.err == "" {
				if err != nil || len(c.Users) != 1 || c.Users[0].Email != "dev@x" {
					t.Fatalf("LoadConfig = %+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and %q", err, path, tc.err)
			}
		})
	}
}
