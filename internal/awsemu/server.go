package awsemu

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

//go:embed launcher.py
var launcher []byte

// PythonEnv names the Python interpreter that has moto, when it is not the
// one beside moto_server on PATH.
const PythonEnv = "TRELLIS_MOTO_PYTHON"

// ErrNoMoto is returned when no Python with moto can be found.
var ErrNoMoto = errors.New("moto_server (the AWS API emulator, moto 5.x) not found")

// Find returns a Python interpreter that imports moto: $TRELLIS_MOTO_PYTHON,
// else the python3 beside moto_server on PATH, pyenv's shims, python3.
func Find(ctx context.Context) (string, error) {
	var tried []string
	var candidates []string
	if p := os.Getenv(PythonEnv); p != "" {
		candidates = append(candidates, p)
	}
	if ms, err := exec.LookPath("moto_server"); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(ms), "python3"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".pyenv", "shims", "python3"))
	}
	candidates = append(candidates, "python3")
	for _, py := range candidates {
		out, err := exec.CommandContext(ctx, py, "-c", "import moto; print(moto.__version__)").CombinedOutput()
		if err == nil {
			return py, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", py, firstLine(out, err)))
	}
	return "", fmt.Errorf("%w: tried %v; install moto[server] 5.2 for Python 3.11 (pyenv) or set $%s", ErrNoMoto, tried, PythonEnv)
}

func firstLine(out []byte, err error) string {
	if i := bytes.IndexByte(bytes.TrimSpace(out), '\n'); i > 0 {
		out = out[:i]
	}
	if s := string(bytes.TrimSpace(out)); s != "" {
		return s
	}
	return err.Error()
}

// Options of a server.
type Options struct {
	// Python with moto (default: Find).
	Python string
	// Port on 127.0.0.1 (default: a free one).
	Port int
	// Dir holds the launcher and the log (default: a new temporary dir,
	// removed by Stop).
	Dir string
	// StartTimeout bounds the wait for the first answer (default 60s).
	StartTimeout time.Duration
	Log          *slog.Logger
	// Env is extra environment (NAME=value) for the emulator process,
	// e.g. TRELLIS_MOTO_SWITCH_INTERVAL (seconds) for Python's thread
	// switch interval: a tiny one makes races between requests show.
	Env []string
}

// Server is a running emulator.
type Server struct {
	URL     string
	LogFile string
	cmd     *exec.Cmd
	done    chan error
	dir     string
	ownDir  bool
}

// Start launches moto on loopback and waits until it answers.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Python == "" {
		py, err := Find(ctx)
		if err != nil {
			return nil, err
		}
		o.Python = py
	}
	if o.Port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		o.Port = p
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", o.Port), dir: o.Dir, done: make(chan error, 1)}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "trellis-awsemu-")
		if err != nil {
			return nil, fmt.Errorf("failed to create the emulator's dir: %w", err)
		}
		s.dir, s.ownDir = d, true
	}
	script := filepath.Join(s.dir, "launcher.py")
	if err := os.WriteFile(script, launcher, 0o644); err != nil {
		return nil, fmt.Errorf("failed to write the emulator launcher: %w", err)
	}
	s.LogFile = filepath.Join(s.dir, "moto.log")
	logf, err := os.Create(s.LogFile)
	if err != nil {
		return nil, fmt.Errorf("failed to create the emulator log: %w", err)
	}
	defer logf.Close()
	// Not CommandContext: the server outlives Start's context.
	s.cmd = exec.Command(o.Python, script, "-p", strconv.Itoa(o.Port))
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if len(o.Env) > 0 {
		s.cmd.Env = append(os.Environ(), o.Env...)
	}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the emulator: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	o.Log.Info("starting the AWS API emulator", "url", s.URL, "log", s.LogFile)
	if err := s.wait(ctx, o.StartTimeout); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) wait(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := s.Ping(ctx); err == nil {
			return nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			log, _ := os.ReadFile(s.LogFile)
			return fmt.Errorf("the AWS API emulator exited while starting (%v): %s", err, bytes.TrimSpace(log))
		case <-ctx.Done():
			return fmt.Errorf("the AWS API emulator did not answer at %s within %s (log %s): %w", s.URL, timeout, s.LogFile, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Ping asks moto's own API whether it is up.
func (s *Server) Ping(ctx context.Context) error {
	return s.call(ctx, http.MethodGet, "/moto-api/")
}

// Reset drops every resource in every service.
func (s *Server) Reset(ctx context.Context) error {
	return s.call(ctx, http.MethodPost, "/moto-api/reset")
}

func (s *Server) call(ctx context.Context, method, path string) error {
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, nil)
	if err != nil {
		return fmt.Errorf("make the %s %s request: %w", method, path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("call the emulator: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

// Stop kills the emulator (its whole process group) and removes its dir if
// Start made it.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		err := <-s.done // the exit, kept for a second Stop
		s.done <- err
	}
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("failed to find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
