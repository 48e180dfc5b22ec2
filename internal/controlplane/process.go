package controlplane

import (
	"fmt"
	"syscall"
)

// StartProcess runs another component of the control plane (an aggregated
// apiserver, a webhook, a controller) with its log in Dir/<name>.log. It
// stops before the built-in components do, in reverse start order, and
// shows in Logs and PIDs. Starting a name again replaces a stopped process
// of that name (a restart after KillProcess).
func (cp *ControlPlane) StartProcess(name, bin string, args ...string) error {
	for _, p := range cp.extra {
		if p.name == name && !p.exited() {
			return fmt.Errorf("%s is already running (pid %d)", name, p.cmd.Process.Pid)
		}
	}
	p, err := cp.start(name, bin, args...)
	if err != nil {
		return err
	}
	for i, old := range cp.extra {
		if old.name == name {
			cp.extra[i] = p
			return nil
		}
	}
	cp.extra = append(cp.extra, p)
	return nil
}

// KillProcess sends SIGKILL to a process StartProcess ran and waits for it
// to exit: a crash, for fault tests.
func (cp *ControlPlane) KillProcess(name string) error {
	for _, p := range cp.extra {
		if p.name == name && !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			return nil
		}
	}
	return fmt.Errorf("no running process %s", name)
}

// Exited reports whether a process StartProcess ran has exited, and its
// log's tail when it has.
func (cp *ControlPlane) Exited(name string) (bool, string) {
	for _, p := range cp.extra {
		if p.name == name && p.exited() {
			return true, TailFile(p.log, 30)
		}
	}
	return false, ""
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
