package addon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/pki"
)

// TestIntegrationFleetEtcdMembers runs the fleet's etcd as the AWS addon
// renders it: three real etcd processes with the rendered container's
// flags (names from POD_NAME, peer URLs, the initial cluster, peer TLS)
// and the certificates the applier seeds, started at once as the
// Parallel StatefulSet starts them. Only what a pod gives and loopback
// cannot is changed: each member listens on its own 127.0.1.x instead
// of the pod's 0.0.0.0, its name resolves there through a private
// /etc/hosts (a mount namespace of its own), and the pod's paths are
// folders of the test. They must form one cluster over mutual TLS, keep
// serving writes with one member SIGKILLed, take the member back from its
// volume under its name, and refuse a peer whose certificate is not from
// the etcd CA (the fleet's admin certificate).
func TestIntegrationFleetEtcdMembers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: each etcd member gets its own /etc/hosts in a mount namespace (unshare)")
	}
	rendered, err := addons.Render(load(t, "fleet-us-east-1"), Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rendered, func(r addons.Rendered) bool { return r.Addon.Name == KarmadaAPIServerAddon })
	if i < 0 {
		t.Fatalf("no addon %s rendered", KarmadaAPIServerAddon)
	}
	sts, err := fleetStatefulSet(rendered[i])
	if err != nil {
		t.Fatal(err)
	}
	n := int(*sts.Spec.Replicas)
	if n != 3 || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Spec.ServiceName != KarmadaPeerService {
		t.Fatalf("rendered %d replicas, policy %q, service %q: want 3, Parallel, %s", n, sts.Spec.PodManagementPolicy, sts.Spec.ServiceName, KarmadaPeerService)
	}
	etcd := sts.Spec.Template.Spec.Containers[slices.IndexFunc(sts.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "etcd" })]

	dir := t.TempDir()
	files, err := karmadaPKI(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(pkiDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ip := func(i int) string { return fmt.Sprintf("127.0.1.%d", 10+i) }
	host := func(i int) string { return fmt.Sprintf("%s-%d.%s", KarmadaService, i, karmadaPeerDomain()) }
	// The names the peer Service gives: each member's (forward), and, as
	// CoreDNS answers for a pod IP of a headless Service (reverse), the
	// connecting address's name under the Service's cluster.local domain:
	// with --peer-client-cert-auth etcd checks that the address a peer
	// connects from has a name its certificate covers. Here every member
	// connects from 127.0.0.1. No nameserver: nothing leaves loopback.
	var hosts strings.Builder
	fmt.Fprintf(&hosts, "127.0.0.1 %s-source.%s.cluster.local\n", KarmadaService, karmadaPeerDomain())
	for i := range n {
		fmt.Fprintf(&hosts, "%s %s\n", ip(i), host(i))
	}
	hostsFile, resolvFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(hostsFile, []byte(hosts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resolvFile, []byte("options timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The member's command line: the rendered one, POD_NAME expanded as
	// the kubelet expands it, the pod's paths and listen addresses
	// replaced (each replacement must find its flag, so that a change to
	// the manifest fails here rather than go untested).
	args := func(i int) []string {
		if len(etcd.Env) != 1 || etcd.Env[0].Name != "POD_NAME" || etcd.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Fatalf("etcd's env %v: want POD_NAME from metadata.name", etcd.Env)
		}
		pod := fmt.Sprintf("%s-%d", KarmadaService, i)
		replace := map[string]string{
			"--listen-peer-urls=https://0.0.0.0:2380":       "--listen-peer-urls=https://" + ip(i) + ":2380",
			"--listen-client-urls=http://127.0.0.1:2379":    "--listen-client-urls=http://" + ip(i) + ":2379",
			"--advertise-client-urls=http://127.0.0.1:2379": "--advertise-client-urls=http://" + ip(i) + ":2379",
			"--listen-metrics-urls=http://0.0.0.0:2381":     "--listen-metrics-urls=http://" + ip(i) + ":2381",
			"--data-dir=/var/lib/etcd":                      "--data-dir=" + filepath.Join(dir, pod),
		}
		var out []string
		for _, a := range etcd.Command[1:] {
			if r, ok := replace[a]; ok {
				delete(replace, a)
				a = r
			}
			a = strings.ReplaceAll(a, "$(POD_NAME)", pod)
			a = strings.ReplaceAll(a, "/etc/karmada/pki/", pkiDir+"/")
			out = append(out, a)
		}
		if len(replace) > 0 {
			t.Fatalf("rendered etcd flags changed: %v not found in %v", replace, etcd.Command)
		}
		return out
	}
	bin := filepath.Join(controlplane.BinDir(), "etcd")
	procs := make([]*exec.Cmd, n)
	start := func(i int) {
		log, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		// sh binds the hosts and resolver files in the new mount
		// namespace, then becomes etcd (exec): the process killed below
		// is etcd.
		cmd := exec.Command("unshare", append([]string{"--mount", "sh", "-c",
			`mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`, hostsFile, resolvFile, bin}, args(i)...)...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	t.Cleanup(func() {
		for i, p := range procs {
			if p != nil && p.ProcessState == nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
			if t.Failed() {
				t.Logf("--- etcd member %d log (tail) ---\n%s", i, controlplane.TailFile(filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)), 15))
			}
		}
	})
	began := time.Now()
	for i := range n {
		start(i)
	}
	endpoint := func(i int) string { return "http://" + ip(i) + ":2379" }
	client := func(eps ...string) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	all := client(endpoint(0), endpoint(1), endpoint(2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var members *clientv3.MemberListResponse
	for {
		c, cc := context.WithTimeout(ctx, 2*time.Second)
		_, err := all.Put(c, "/fleet/a", "1")
		cc()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no quorum within a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("3 members in quorum %s after starting them", time.Since(began).Round(time.Millisecond))
	if members, err = all.MemberList(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members.Members {
		got = append(got, m.Name+"="+strings.Join(m.PeerURLs, ","))
	}
	slices.Sort(got)
	if want := strings.Split(karmadaInitialCluster(n), ","); !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}

	// A peer must present the etcd CA's certificate: the fleet's admin
	// certificate (the fleet CA's) is refused, the peer certificate taken.
	peer := func(certFile, keyFile string) error {
		var certs []tls.Certificate
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, certFile), filepath.Join(pkiDir, keyFile))
			if err != nil {
				t.Fatal(err)
			}
			certs = append(certs, cert)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(files[pki.EtcdCACert])
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{Certificates: certs, RootCAs: roots},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, ip(0)+":2380")
			},
		}}
		resp, err := hc.Get("https://" + host(0) + ":2380/version")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	if err := peer(pki.EtcdPeerCert, pki.EtcdPeerKey); err != nil {
		t.Fatalf("the peer certificate, on a member's peer port: %v", err)
	}
	if err := peer(pki.AdminCert, pki.AdminKey); err == nil {
		t.Fatal("the fleet's admin certificate was taken on a member's peer port: any fleet client could join its etcd")
	}
	if err := peer("", ""); err == nil {
		t.Fatal("a peer without a certificate was taken on a member's peer port")
	}

	// The leader SIGKILLed: the other two elect one and serve writes.
	st, err := all.Status(ctx, endpoint(0))
	if err != nil {
		t.Fatal(err)
	}
	down := slices.IndexFunc(members.Members, func(m *etcdserverpb.Member) bool { return m.ID == st.Leader })
	if down < 0 {
		t.Fatalf("leader %x is not a member", st.Leader)
	}
	down = int(members.Members[down].Name[len(members.Members[down].Name)-1] - '0')
	if err := procs[down].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = procs[down].Wait()
	killed := time.Now()
	var rest []string
	for i := range n {
		if i != down {
			rest = append(rest, endpoint(i))
		}
	}
	two := client(rest...)
	for k := 0; k < 20; {
		c, cc := context.WithTimeout(ctx, 2*time.Second)
		_, err := two.Put(c, fmt.Sprintf("/fleet/b/%02d", k), "1")
		cc()
		switch {
		case err == nil:
			if k == 0 {
				t.Logf("leader (member %d) SIGKILLed: first write %s after", down, time.Since(killed).Round(time.Millisecond))
			}
			k++
		case k > 0 || time.Since(killed) > 15*time.Second:
			t.Fatalf("write %d with member %d killed: %v", k, down, err)
		}
	}
	// Back from its volume under its name: it catches up.
	began = time.Now()
	start(down)
	one := client(endpoint(down))
	for {
		c, cc := context.WithTimeout(ctx, 2*time.Second)
		resp, err := one.Get(c, "/fleet/b/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cc()
		if err == nil && resp.Count == 20 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member %d back from its data: %v, %v", down, resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("member %d back with the 20 writes made while it was down %s after its restart", down, time.Since(began).Round(time.Millisecond))
	if m, err := all.MemberList(ctx); err != nil || len(m.Members) != n {
		t.Fatalf("after the restart: %v members, %v", m, err)
	}
}
