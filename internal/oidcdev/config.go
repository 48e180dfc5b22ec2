package oidcdev

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
)

// LoadConfig reads a Config from a JSON file (the local cluster's Secret
// trellis-oidc-dev holds one); an error names the file and the field.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read the provider's config: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func (c Config) validate() error {
	if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("issuer %q: want an http(s) URL", c.Issuer)
	}
	if c.ClientID == "" || c.ClientSecret == "" {
		return fmt.Errorf("clientID and clientSecret are required")
	}
	if len(c.RedirectURIs) == 0 {
		return fmt.Errorf("redirectURIs: want at least one")
	}
	for i, u := range c.Users {
		if u.ID == "" || u.Password == "" {
			return fmt.Errorf("users[%d]: id and password are required", i)
		}
	}
	return nil
}
