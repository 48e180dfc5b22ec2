package kopsenv

import (
	"errors"
	"os"
	"testing"
)

func TestCheckEmulatorURL(t *testing.T) {
	for _, tc := range []struct {
		url, want string
		err       error
	}{
		{"http://127.0.0.1:5000", "http://127.0.0.1:5000", nil},
		{"http://127.0.0.1:5000/", "http://127.0.0.1:5000", nil},
		{"http://localhost:5000", "http://localhost:5000", nil},
		{"http://[::1]:5000", "http://[::1]:5000", nil},
		{"http://10.0.0.1:5000", "", ErrEmulatorNotLoopback},
		{"https://ec2.us-east-1.amazonaws.com", "", ErrEmulatorNotLoopback},
		{"127.0.0.1:5000", "", nil},
		{"http://127.0.0.1:5000/moto-api", "", nil},
	} {
		u, err := CheckEmulatorURL(tc.url)
		switch {
		case tc.want != "" && (err != nil || u.String() != tc.want):
			t.Errorf("%s: got %v, %v; want %s", tc.url, u, err, tc.want)
		case tc.want == "" && err == nil:
			t.Errorf("%s: accepted, want an error", tc.url)
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: %v, want %v", tc.url, err, tc.err)
		}
	}
}

func TestUseEmulator(t *testing.T) {
	for _, k := range []string{"AWS_ENDPOINT_URL", "S3_ENDPOINT", "AWS_REGION", "S3_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_EC2_METADATA_DISABLED", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "mine")
	if err := UseEmulator("http://127.0.0.1:5123", "eu-west-1"); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:5123", "S3_ENDPOINT": "http://127.0.0.1:5123",
		"AWS_REGION": "eu-west-1", "S3_REGION": "eu-west-1",
		"AWS_ACCESS_KEY_ID": "mine", "AWS_SECRET_ACCESS_KEY": "trellis-emulator",
	} {
		if got := os.Getenv(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if err := UseEmulator("http://192.0.2.1:5123", "eu-west-1"); !errors.Is(err, ErrEmulatorNotLoopback) {
		t.Errorf("remote emulator: %v", err)
	}
}
