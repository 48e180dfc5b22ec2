package kopsenv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
)

// ErrEmulatorNotLoopback is returned for an emulator URL that is not on the
// loopback interface: an emulator is a test fixture, and a typo must never
// send credentials or state to a remote host that merely answers.
var ErrEmulatorNotLoopback = errors.New("the AWS emulator must listen on loopback (127.0.0.0/8, ::1 or localhost)")

// emulatorDefaults are set for an emulator when the environment has none:
// the emulator accepts any credentials, and there is no instance metadata.
var emulatorDefaults = map[string]string{
	"AWS_ACCESS_KEY_ID":         "trellis-emulator",
	"AWS_SECRET_ACCESS_KEY":     "trellis-emulator",
	"AWS_EC2_METADATA_DISABLED": "true",
	"S3_ACCESS_KEY_ID":          "trellis-emulator",
	"S3_SECRET_ACCESS_KEY":      "trellis-emulator",
}

// CheckEmulatorURL parses an emulator URL and refuses anything that is not
// plain HTTP(S) on loopback.
func CheckEmulatorURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("AWS emulator URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("AWS emulator URL %q: want http://127.0.0.1:PORT", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return nil, fmt.Errorf("AWS emulator URL %q: %w", raw, ErrEmulatorNotLoopback)
	}
	u.Path = ""
	return u, nil
}

// UseEmulator sends every AWS SDK call of this process (kops's awsup and
// Trellis's own clients, through AWS_ENDPOINT_URL) and the S3 state store
// (S3_ENDPOINT) to an AWS API emulator, in region, with placeholder
// credentials where none are set. Process-wide, as kops's settings are.
func UseEmulator(raw, region string) error {
	u, err := CheckEmulatorURL(raw)
	if err != nil {
		return err
	}
	set := map[string]string{
		"AWS_ENDPOINT_URL": u.String(),
		"S3_ENDPOINT":      u.String(),
		"AWS_REGION":       region,
		"S3_REGION":        region,
	}
	for k, v := range emulatorDefaults {
		if os.Getenv(k) == "" {
			set[k] = v
		}
	}
	for k, v := range set {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("failed to set %s: %w", k, err)
		}
	}
	return nil
}
