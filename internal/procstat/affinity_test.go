package procstat

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinChild pins a running child to one CPU and checks the mask of its
// threads, those it had and those it starts after the pin.
func TestPinChild(t *testing.T) {
	if os.Getenv("PROCSTAT_PIN_CHILD") == "1" {
		pinChild()
		return
	}
	if runtime.NumCPU() < 2 {
		t.Fatalf("%d CPU: pinning to one of them says nothing", runtime.NumCPU())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinChild$")
	cmd.Env = append(os.Environ(), "PROCSTAT_PIN_CHILD=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("child said %q, want ready", lines.Text())
	}
	before, err := Allowed(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) < 2 {
		t.Fatalf("child runs on CPUs %v before the pin, want all", before)
	}
	last := before[len(before)-1]
	if err := Pin(cmd.Process.Pid, []int{last}); err != nil {
		t.Fatal(err)
	}
	if got, err := Allowed(cmd.Process.Pid); err != nil || !slices.Equal(got, []int{last}) {
		t.Fatalf("child's main thread on %v (%v) after the pin, want [%d]", got, err, last)
	}
	fmt.Fprintln(in, "go")
	var threads int
	for lines.Scan() {
		if lines.Text() == "done" {
			break
		}
		threads++
		if want := fmt.Sprint([]int{last}); lines.Text() != want {
			t.Errorf("a thread started after the pin runs on %s, want %s", lines.Text(), want)
		}
	}
	if threads != 8 {
		t.Fatalf("child reported %d new threads, want 8", threads)
	}
	if err := Pin(cmd.Process.Pid, nil); err == nil || !strings.Contains(err.Error(), "no CPUs") {
		t.Fatalf("Pin with no CPUs: %v", err)
	}
}

// pinChild waits for "go", then starts 8 threads (goroutines locked to
// new OS threads while the others hold theirs) and prints each one's CPUs.
func pinChild() {
	fmt.Println("ready")
	if s := bufio.NewScanner(os.Stdin); !s.Scan() {
		os.Exit(1)
	}
	var (
		wg, held sync.WaitGroup
		mu       sync.Mutex
		masks    []string
	)
	release := make(chan struct{})
	for range 8 {
		wg.Add(1)
		held.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			cpus, _ := Allowed(unix.Gettid())
			mu.Lock()
			masks = append(masks, fmt.Sprint(cpus))
			mu.Unlock()
			held.Done()
			<-release
		}()
	}
	held.Wait()
	close(release)
	wg.Wait()
	for _, m := range masks {
		fmt.Println(m)
	}
	fmt.Println("done")
	os.Exit(0)
}
