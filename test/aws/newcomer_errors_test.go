package aws

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/internal/awsemu"
)

// teachingErrors checks, through the binary and before anything is
// written, that a definition's errors say how to fix them: every unknown
// image at once, and the setting an arm64 group lacks.
func teachingErrors(t *testing.T, c *awsemu.Clients, trellis func(...string) result) {
	t.Helper()
	images := definition(t, func(s string) string {
		s = strings.Replace(s, "  image: ssm:/trellis/local-aws/images/node\n  minSize: 2", "  image: ssm:/trellis/missing/general\n  minSize: 2", 1)
		return strings.Replace(s, "  image: ssm:/trellis/local-aws/images/node\n  minSize: 1", "  image: ssm:/trellis/missing/batch\n  minSize: 1", 1)
	})
	keepsStore(t, c, "a plan with unknown images", func() {
		r := trellis("cluster", "create", "-f", images)
		for _, want := range []string{"images not found in the cloud: 2 of 3", "ssm:/trellis/missing/general (groups general)", "ssm:/trellis/missing/batch (groups batch)"} {
			if r.code == 0 || !strings.Contains(r.stderr, want) {
				t.Errorf("create with two unknown images: %s\nwant %q", r, want)
			}
		}
	})
	arm := definition(t, func(s string) string {
		return strings.Replace(s, "  machineType: m6i.large\n  image: ssm:/trellis/local-aws/images/node\n  minSize: 1", "  machineType: m7g.large\n  image: ssm:/trellis/local-aws/images/node\n  minSize: 1", 1)
	})
	r := trellis("cluster", "create", "-f", arm)
	if r.code != 1 || !strings.Contains(r.stderr, "an arm64 machine type in a group whose architecture is amd64: add `architecture: arm64` to the group") {
		t.Errorf("create with an arm64 type in an amd64 group: %s; want exit 1 and the fix", r)
	}
}

// failingLines are the progress lines of a task kind ("Route/") in out.
func failingLines(out, kind string) []string {
	return regexp.MustCompile(`(?m)^Still failing: `+regexp.QuoteMeta(kind)+`.*$`).FindAllString(out, -1)
}

// checkCoded fails when a task kind's progress lines are missing or lack
// the cloud's error code.
func checkCoded(t *testing.T, out, kind string) {
	t.Helper()
	lines := failingLines(out, kind)
	if len(lines) == 0 {
		t.Errorf("no progress line for a failing %s task:\n%s", kind, out)
	}
	for _, l := range lines {
		if !strings.Contains(l, awsemu.FaultCode) {
			t.Errorf("a failing %s task's progress line lacks the cloud's code %s: %s", kind, awsemu.FaultCode, l)
		}
	}
}

// interruptedDelete deletes a cluster whose NAT gateways the cloud refuses
// to delete, stops it with SIGTERM between passes, and checks that it
// stopped within 10 s, said what it deleted and what is left and what to
// run, and kept the state store. The NAT gateway's route table must be
// left with it: kops finds a NAT gateway only through its routes.
func interruptedDelete(t *testing.T, c *awsemu.Clients, proxy *awsemu.FaultProxy, env []string, def string) {
	t.Helper()
	keepsStore(t, c, "the interrupted delete", func() {
		proxy.Refuse("DeleteNatGateway", -1)
		defer proxy.Clear()
		cmd := exec.Command(trellisBin, "cluster", "delete", "-f", def, "--yes", "--wait", "5m", "--interval", "5s")
		cmd.Env = append(os.Environ(), env...)
		var out, errb syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.After(3 * time.Minute)
		for !strings.Contains(out.String(), "Pass 1: ") {
			select {
			case err := <-exited:
				t.Fatalf("delete ended before its first pass was over (%v):\n%s\n%s", err, out.String(), errb.String())
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("no pass finished in 3m (killed: %v):\n%s\n%s", <-exited, out.String(), errb.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
		sent := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("delete still running 10s after SIGTERM (killed: %v):\n%s\n%s", <-exited, out.String(), errb.String())
		}
		t.Logf("delete stopped %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
		o := out.String()
		again := "trellis cluster delete -f " + def + " --state " + state + " --yes"
		if err == nil || !strings.Contains(errb.String(), "interrupted") || !strings.Contains(errb.String(), "the state store is kept") {
			t.Errorf("after SIGTERM: exit %v\n%s\n%s; want a failure that says it was interrupted and kept the store", err, o, errb.String())
		}
		left := regexp.MustCompile(`(?s)Left (\d+) cloud resources of [^:]+:\n(.*)The state store keeps`).FindStringSubmatch(o)
		// The route table to the NAT gateway is kept with it: kops finds
		// a NAT gateway only through its routes.
		if left == nil || !strings.Contains(left[2], "nat-gateway:") || !strings.Contains(left[2], "route-table:") || !strings.Contains(o, "Deleted ") || !strings.Contains(o, "To delete what is left, run:\n  "+again) {
			t.Errorf("after SIGTERM the delete said:\n%s\nwant what it deleted, the NAT gateways and their route tables left, and %q", o, again)
		}
	})
}

// kopsAgreesOnDelete checks that the kops CLI, reading the cluster from
// the state store, would delete the very resources trellis lists.
func kopsAgreesOnDelete(t *testing.T, emulator string, trellis func(...string) result, def string) {
	t.Helper()
	ours := trellis("cluster", "delete", "-f", def)
	theirs := run(t, kopsEnv(emulator), kopsBinary(t), "delete", "cluster", "--name", clusterName, "--state", state)
	if ours.code != 0 || theirs.code != 0 {
		t.Fatalf("delete plans: trellis %s\nkops %s", ours, theirs)
	}
	var want, got []string
	for _, l := range tableRows(ours.out, "  TYPE") {
		want = append(want, strings.Fields(l)[1])
	}
	for _, l := range tableRows(theirs.out, "TYPE") {
		f := strings.Fields(l)
		got = append(got, f[len(f)-1])
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(want, got) {
		t.Errorf("trellis would delete %v, kops %v\ntrellis:\n%s\nkops:\n%s", want, got, ours.out, theirs.out)
	}
}

// tableRows are the non-empty lines after a table's header line.
func tableRows(out, header string) []string {
	var rows []string
	in := false
	for l := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && strings.TrimSpace(l) == "":
			return rows
		case in && strings.HasPrefix(l, "  ") == strings.HasPrefix(header, "  "):
			rows = append(rows, l)
		case in:
			return rows
		}
	}
	return rows
}

// refusedRoute creates a cluster whose routes the cloud refuses: kops's
// route task, like its autoscaling-group task, reports the cloud's message
// alone, so both its progress lines and the final failure must carry the
// code. (A fresh cluster: a create whose NAT routes failed cannot be
// resumed, as kops finds a NAT gateway's Elastic IP through its route.)
func refusedRoute(t *testing.T, c *awsemu.Clients, proxy *awsemu.FaultProxy, trellis func(...string) result, def string) {
	t.Helper()
	keepsStore(t, c, "the create with routes refused", func() {
		proxy.Refuse("CreateRoute", -1)
		defer proxy.Clear()
		r := trellis("cluster", "create", "-f", def, "--yes", "--task-timeout", "20s", "--progress-interval", "2s")
		final := regexp.MustCompile(`deadline exceeded executing task Route/[^ ]+\. Example error: .*\(` + awsemu.FaultCode + `, HTTP 400\)`)
		if r.code == 0 || !final.MatchString(r.stderr) || !strings.Contains(r.stderr, "state store was restored") {
			t.Errorf("create with CreateRoute refused: %s; want the Route task and the code %s, and the store restored", r, awsemu.FaultCode)
		}
		checkCoded(t, r.out, "Route/")
	})
}

// waitingRoute creates a cluster whose routes the cloud answers as if
// their NAT gateway did not exist yet (InvalidNatGatewayID.NotFound): kops
// takes that as "not ready" (a fi.TryAgainLaterError, which it logs only
// at klog V(2)) and retries, so the progress lines must say what the task
// waits on.
func waitingRoute(t *testing.T, c *awsemu.Clients, proxy *awsemu.FaultProxy, trellis func(...string) result, def string) {
	t.Helper()
	keepsStore(t, c, "the create with routes waiting", func() {
		proxy.RefuseWith("CreateRoute", "InvalidNatGatewayID.NotFound", -1)
		defer proxy.Clear()
		r := trellis("cluster", "create", "-f", def, "--yes", "--task-timeout", "20s", "--progress-interval", "2s")
		lines := regexp.MustCompile(`(?m)^Still waiting: Route/.*$`).FindAllString(r.out, -1)
		if r.code == 0 || len(lines) == 0 {
			t.Errorf("create with routes waiting on their NAT gateway: %s; want a failure and progress lines", r)
		}
		for _, l := range lines {
			if !strings.Contains(l, "not ready: waiting for the NAT Gateway to be created") {
				t.Errorf("a waiting Route task's progress line lacks its reason: %s", l)
			}
		}
	})
}
