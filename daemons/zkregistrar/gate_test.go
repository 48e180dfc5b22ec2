package zkregistrar

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestGate(t *testing.T) {
	const timeout = 10 * time.Second
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	for _, tc := range []struct {
		name   string
		in     GateInput
		status corev1.ConditionStatus
		reason string // "" with status "": leave the condition as it is
	}{
		{name: "new pod registered", in: GateInput{Serving: true, Registered: true}, status: T, reason: ReasonRegistered},
		{name: "already True", in: GateInput{Serving: true, Registered: true, Current: T, CurrentReason: ReasonRegistered}},
		{name: "registration on its way", in: GateInput{Serving: true}},
		{name: "restart: True, not re-registered yet", in: GateInput{Serving: true, Current: T, CurrentReason: ReasonRegistered}},
		{name: "deregistered", in: GateInput{Current: T, CurrentReason: ReasonRegistered}, status: F, reason: ReasonDeregistered},
		{name: "deregistration on its way", in: GateInput{Registered: true, Current: T, CurrentReason: ReasonRegistered}},
		{name: "already False", in: GateInput{Current: F, CurrentReason: ReasonDeregistered}},
		{name: "never registered, not serving", in: GateInput{}},
		{name: "new pod, no session", in: GateInput{Serving: true, SessionLost: 2 * time.Second}, status: F, reason: ReasonZooKeeperUnavailable},
		{name: "new pod, no session, said so", in: GateInput{Serving: true, SessionLost: 2 * time.Second, Current: F, CurrentReason: ReasonZooKeeperUnavailable}},
		{name: "True, session lost within its timeout", in: GateInput{Serving: true, Registered: true, SessionLost: timeout, Current: T, CurrentReason: ReasonRegistered}},
		{name: "True, session lost past its timeout", in: GateInput{Serving: true, Registered: true, SessionLost: timeout + time.Second, Current: T, CurrentReason: ReasonRegistered},
			status: F, reason: ReasonZooKeeperUnavailable},
		{name: "not serving, True, session lost past its timeout", in: GateInput{Registered: true, SessionLost: timeout + time.Second, Current: T, CurrentReason: ReasonRegistered},
			status: F, reason: ReasonZooKeeperUnavailable},
		{name: "not serving, never True, no session", in: GateInput{SessionLost: timeout + time.Second}},
		{name: "back after an outage", in: GateInput{Serving: true, Registered: true, Current: F, CurrentReason: ReasonZooKeeperUnavailable}, status: T, reason: ReasonRegistered},
		{name: "just started, no session yet", in: GateInput{Serving: true, SessionLost: 100 * time.Millisecond}},
		{name: "invalid ports", in: GateInput{Serving: true, Invalid: errors.New("bad port")}, status: F, reason: ReasonInvalidDiscovery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.SessionTimeout = timeout
			status, reason, msg, change := Gate(tc.in)
			if change != (tc.status != "") || status != tc.status || reason != tc.reason {
				t.Errorf("Gate = %q %q %q %v; want %q %q", status, reason, msg, change, tc.status, tc.reason)
			}
			if change && msg == "" {
				t.Error("a written condition must say why")
			}
		})
	}
}
