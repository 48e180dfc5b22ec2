package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/gateway"
)

// consoleFlags configure the web console; without --oidc-issuer it is off.
type consoleFlags struct {
	issuer, clientID, clientSecretFile, redirectURL, issuerCA string
	usernameClaim, usernamePrefix, groupsClaim, groupsPrefix  string
	sessionKeyFile, capacityStore, prometheus                 string
}

func (f *consoleFlags) register() {
	flag.StringVar(&f.issuer, "oidc-issuer", "", "OIDC issuer people sign in to the console with (empty: no console)")
	flag.StringVar(&f.clientID, "oidc-client-id", "trellis-console", "the console's OIDC client id")
	flag.StringVar(&f.clientSecretFile, "oidc-client-secret-file", "/var/run/trellis/console/client-secret", "file holding the console's OIDC client secret")
	flag.StringVar(&f.redirectURL, "oidc-redirect-url", "", "the console's callback as browsers reach it (https://HOST/console/callback)")
	flag.StringVar(&f.issuerCA, "oidc-ca", "", "PEM roots of the issuer's serving certificate (empty: the system roots)")
	flag.StringVar(&f.usernameClaim, "oidc-username-claim", "email", "claim that is the user name (as the apiserver's --oidc-username-claim)")
	flag.StringVar(&f.usernamePrefix, "oidc-username-prefix", "oidc:", "prefix of user names (as the apiserver's --oidc-username-prefix)")
	flag.StringVar(&f.groupsClaim, "oidc-groups-claim", "groups", "claim that lists the groups")
	flag.StringVar(&f.groupsPrefix, "oidc-groups-prefix", "oidc:", "prefix of group names")
	flag.StringVar(&f.sessionKeyFile, "console-session-key-file", "/var/run/trellis/console/session-key", "file holding at least 32 bytes that sign console sessions")
	flag.StringVar(&f.capacityStore, "capacity-store", "", "quota sample store (JSON lines) the capacity page forecasts from")
	flag.StringVar(&f.prometheus, "prometheus", "", "Prometheus the capacity page reads usage history from (instead of --capacity-store)")
}

// mount builds the console and serves it at /console/ beside the API.
func (f *consoleFlags) mount(g *gateway.Gateway) error {
	if f.issuer == "" {
		return nil
	}
	key, err := os.ReadFile(f.sessionKeyFile)
	if err != nil {
		return fmt.Errorf("failed to read the console's session key: %w", err)
	}
	secret, err := os.ReadFile(f.clientSecretFile)
	if err != nil {
		return fmt.Errorf("failed to read the console's OIDC client secret: %w", err)
	}
	o := &console.OIDC{
		Issuer: f.issuer, ClientID: f.clientID, ClientSecret: strings.TrimSpace(string(secret)), RedirectURL: f.redirectURL,
		UsernameClaim: f.usernameClaim, UsernamePrefix: f.usernamePrefix, GroupsClaim: f.groupsClaim, GroupsPrefix: f.groupsPrefix,
	}
	if f.issuerCA != "" {
		b, err := os.ReadFile(f.issuerCA)
		if err != nil {
			return fmt.Errorf("failed to read the OIDC issuer's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("%s: no PEM certificate", f.issuerCA)
		}
		o.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	cfg := console.Config{API: g.Handler(), SessionKey: key, OIDC: o, BasePath: console.MountPath}
	switch {
	case f.prometheus != "":
		cfg.Capacity = console.PrometheusHistory{URL: f.prometheus}
	case f.capacityStore != "":
		cfg.Capacity = console.StoreHistory{Path: f.capacityStore}
	}
	c, err := console.New(cfg)
	if err != nil {
		return fmt.Errorf("failed to build the console: %w", err)
	}
	g.Mount(console.MountPath+"/", http.StripPrefix(console.MountPath, c))
	return nil
}
