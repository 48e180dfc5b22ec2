package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/gateway"
)

// consoleFlags configure the web console; without an issuer (flag or
// file) it is off.
type consoleFlags struct {
	issuer, clientID, clientSecretFile, redirectURL, issuerCA string
	usernameClaim, usernamePrefix, groupsClaim, groupsPrefix  string
	sessionKeyFile, capacityStore, prometheus                 string
	rolloutStore, rolloutCluster                              string
	dir                                                       string
}

func (f *consoleFlags) register() {
	flag.StringVar(&f.dir, "console-dir", "/var/run/trellis/console", "folder of the console's settings (the addon mounts the Secret trellis-gateway-console there): files issuer, client-id, redirect-url, client-secret, session-key; a flag wins over its file")
	flag.StringVar(&f.issuer, "oidc-issuer", "", "OIDC issuer people sign in to the console with (empty: no console)")
	flag.StringVar(&f.clientID, "oidc-client-id", "", "the console's OIDC client id (default: the file client-id, else trellis-console)")
	flag.StringVar(&f.clientSecretFile, "oidc-client-secret-file", "", "file holding the console's OIDC client secret (default: client-secret in --console-dir)")
	flag.StringVar(&f.redirectURL, "oidc-redirect-url", "", "the console's callback as browsers reach it (https://HOST/console/callback)")
	flag.StringVar(&f.issuerCA, "oidc-ca", "", "PEM roots of the issuer's serving certificate (empty: the system roots)")
	flag.StringVar(&f.usernameClaim, "oidc-username-claim", "email", "claim that is the user name (as the apiserver's --oidc-username-claim)")
	flag.StringVar(&f.usernamePrefix, "oidc-username-prefix", "oidc:", "prefix of user names (as the apiserver's --oidc-username-prefix)")
	flag.StringVar(&f.groupsClaim, "oidc-groups-claim", "groups", "claim that lists the groups")
	flag.StringVar(&f.groupsPrefix, "oidc-groups-prefix", "oidc:", "prefix of group names")
	flag.StringVar(&f.sessionKeyFile, "console-session-key-file", "", "file holding at least 32 bytes that sign console sessions (default: session-key in --console-dir)")
	flag.StringVar(&f.capacityStore, "capacity-store", "", "quota sample store (JSON lines) the capacity page forecasts from")
	flag.StringVar(&f.rolloutStore, "rollout-state-store", "", "kops state store (s3://..., file://...) holding the AMI rollout the rollouts page shows (with --rollout-cluster)")
	flag.StringVar(&f.rolloutCluster, "rollout-cluster", "", "cluster whose AMI rollout the rollouts page shows")
	flag.StringVar(&f.prometheus, "prometheus", "", "Prometheus the capacity page reads usage history from (instead of --capacity-store)")
}

// fromDir fills the settings no flag gave from the files in --console-dir.
func (f *consoleFlags) fromDir() {
	file := func(v *string, name string) {
		if *v == "" {
			if b, err := os.ReadFile(filepath.Join(f.dir, name)); err == nil {
				*v = strings.TrimSpace(string(b))
			}
		}
	}
	file(&f.issuer, "issuer")
	file(&f.clientID, "client-id")
	file(&f.redirectURL, "redirect-url")
	if f.clientID == "" {
		f.clientID = "trellis-console"
	}
	if f.clientSecretFile == "" {
		f.clientSecretFile = filepath.Join(f.dir, "client-secret")
	}
	if f.sessionKeyFile == "" {
		f.sessionKeyFile = filepath.Join(f.dir, "session-key")
	}
}

// mount builds the console and serves it at /console/ beside the API.
func (f *consoleFlags) mount(g *gateway.Gateway) error {
	f.fromDir()
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
	cfg := console.Config{API: g.Handler(), SessionKey: key, OIDC: o, BasePath: console.MountPath, Access: g.Authorizer()}
	if f.rolloutStore != "" && f.rolloutCluster != "" {
		if cfg.Rollouts, err = rollout.NewVFSStore(f.rolloutStore, f.rolloutCluster); err != nil {
			return fmt.Errorf("failed to open the rollout state: %w", err)
		}
	}
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
