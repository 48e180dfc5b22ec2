// Package aws tests Trellis's production path as a user runs it: the trellis
// binary (and the real kops CLI) against the AWS API emulator, an S3 state
// store in it, and faults injected over HTTP.
package aws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	kopsroot "k8s.io/kops"

	"github.com/trellis-dev/trellis/internal/awsemu"
)

var trellisBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trellis-aws-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	trellisBin = filepath.Join(dir, "trellis")
	if out, err := exec.Command("go", "build", "-o", trellisBin, "../../cmd/trellis").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build trellis: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func cacheDir() string {
	if d := os.Getenv("TRELLIS_CACHE"); d != "" {
		return d
	}
	d, _ := os.UserCacheDir()
	return filepath.Join(d, "trellis")
}

// result of one command.
type result struct {
	code        int
	out, stderr string
}

func (r result) String() string { return fmt.Sprintf("exit %d\n%s\n%s", r.code, r.out, r.stderr) }

// run runs a program with the test's environment plus env.
func run(t *testing.T, env []string, prog string, args ...string) result {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", prog, args, err)
	}
	return result{code, out.String(), errb.String()}
}

// kopsEnv is what the real kops CLI needs to use the same emulator, store
// and offline assets as trellis --aws-emulator url.
func kopsEnv(url string) []string {
	return []string{
		"AWS_ENDPOINT_URL=" + url, "S3_ENDPOINT=" + url, "AWS_REGION=us-east-1", "S3_REGION=us-east-1",
		// The same credentials as trellis: kops writes the S3 ones into
		// kops-controller's manifest, so others would be a change.
		"AWS_ACCESS_KEY_ID=trellis-emulator", "AWS_SECRET_ACCESS_KEY=trellis-emulator",
		"S3_ACCESS_KEY_ID=trellis-emulator", "S3_SECRET_ACCESS_KEY=trellis-emulator",
		"AWS_EC2_METADATA_DISABLED=true",
		// kops fetches its channel from GitHub; a closed loopback proxy
		// makes that fail at once, without a DNS query leaving the machine
		// (loopback, the emulator, is never proxied).
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"KOPS_BASE_URL=file://" + filepath.Join(cacheDir(), "kops", "offline-assets", kopsroot.Version) + "/",
	}
}

func kopsBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(cacheDir(), "kops", "v"+kopsroot.Version, "kops")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kops CLI not built (%v): run `make tools`", err)
	}
	return p
}

// objects returns a bucket's objects by key, as hashes.
func objects(t *testing.T, seed *awsemu.Clients, bucket string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	p := s3.NewListObjectsV2Paginator(seed.S3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			obj, err := seed.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(obj.Body)
			_ = obj.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[aws.ToString(o.Key)] = fmt.Sprintf("%x", sha256.Sum256(data))
		}
	}
	return out
}

// keepsStore runs fn and fails the test when the state-store bucket
// differs afterwards (what names the step in the message).
func keepsStore(t *testing.T, c *awsemu.Clients, what string, fn func()) {
	t.Helper()
	before := objects(t, c, bucket)
	fn()
	if d := sameObjects(before, objects(t, c, bucket)); d != "" {
		t.Errorf("%s changed the state store:\n%s", what, d)
	}
}

// sameObjects reports the differences between two listings.
func sameObjects(before, after map[string]string) string {
	var d []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, "changed "+k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	return strings.Join(d, "\n")
}

// definition writes clusters/local-aws.yaml and its base into a temporary
// folder, with edits applied, and returns its path.
func definition(t *testing.T, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "base"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"local-aws.yaml", "base/platform.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../clusters", f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		if f == "local-aws.yaml" && edit != nil {
			s = edit(s)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "local-aws.yaml")
}
