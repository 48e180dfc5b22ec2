package apfplan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// CapacityOf reads the cluster's capacity: the shares of its Limited
// priority levels and the shared level's queuing from the API, and the
// server's seats as the sum of their nominal limits
// (apiserver_flowcontrol_nominal_limit_seats, from the apiserver's
// /metrics, which needs a client allowed to read it).
func CapacityOf(ctx context.Context, c kubernetes.Interface) (Capacity, error) {
	pls, err := c.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Capacity{}, fmt.Errorf("failed to list priority levels: %w", err)
	}
	cap := Capacity{Shares: map[string]int32{}}
	for _, pl := range pls.Items {
		if pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementLimited && pl.Spec.Limited != nil && pl.Spec.Limited.NominalConcurrencyShares != nil {
			cap.Shares[pl.Name] = *pl.Spec.Limited.NominalConcurrencyShares
		}
		if q := pl.Spec.Limited; pl.Name == TenantsLevel && q != nil {
			if q.LimitResponse.Queuing != nil {
				cap.Queues, cap.HandSize = q.LimitResponse.Queuing.Queues, q.LimitResponse.Queuing.HandSize
			}
			cap.SharedRejects = q.LimitResponse.Type == flowcontrolv1.LimitResponseTypeReject
		}
	}
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Capacity{}, fmt.Errorf("apiserver metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_flowcontrol_nominal_limit_seats{") {
			continue
		}
		level := labelValue(line, "priority_level")
		if _, limited := cap.Shares[level]; !limited {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return Capacity{}, fmt.Errorf("apiserver metrics: %q: %w", line, err)
		}
		cap.ServerSeats += int(v)
	}
	if cap.ServerSeats == 0 {
		return Capacity{}, fmt.Errorf("apiserver metrics: no apiserver_flowcontrol_nominal_limit_seats")
	}
	return cap, sc.Err()
}

func labelValue(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// Apply writes the proposal's objects (server-side apply, field manager
// trellis-quota). On the shared level it sets the shares only. Then it
// deletes the FlowSchemas labelled as Trellis quota's that the proposal no
// longer holds: a tenant's single schema from before the verb-class split,
// or the schemas of a namespace no longer planned. They go after the new
// ones exist, so that a tenant's requests never fall through to a
// schema of lower precedence in between. Last go the priority levels so
// labelled that the proposal no longer holds (a tenant back in the shared
// level), unless some FlowSchema still points at one.
func Apply(ctx context.Context, c kubernetes.Interface, p Proposal) error {
	levels, schemas := p.Objects()
	opts := metav1.PatchOptions{FieldManager: "trellis-quota", Force: new(true)}
	for i, pl := range levels {
		b, err := json.Marshal(pl)
		if err != nil {
			return fmt.Errorf("failed to encode priority level %d of the proposal: %w", i, err)
		}
		var meta struct {
			Metadata struct{ Name string }
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			return fmt.Errorf("failed to read the name of priority level %d of the proposal: %w", i, err)
		}
		if _, err := c.FlowcontrolV1().PriorityLevelConfigurations().Patch(ctx, meta.Metadata.Name, types.ApplyPatchType, b, opts); err != nil {
			return fmt.Errorf("failed to apply priority level %s: %w", meta.Metadata.Name, err)
		}
	}
	keep := map[string]bool{}
	for _, fs := range schemas {
		b, err := json.Marshal(fs)
		if err != nil {
			return fmt.Errorf("failed to encode flow schema %s: %w", fs.Name, err)
		}
		if _, err := c.FlowcontrolV1().FlowSchemas().Patch(ctx, fs.Name, types.ApplyPatchType, b, opts); err != nil {
			return fmt.Errorf("failed to apply flow schema %s: %w", fs.Name, err)
		}
		keep[fs.Name] = true
	}
	if len(schemas) == 0 {
		// A plan without tenants (Prometheus had no history, a plan made
		// before any) says nothing about which tenants are gone: prune
		// nothing rather than every tenant's schemas and levels.
		return nil
	}
	keepLevels := map[string]bool{}
	for _, l := range p.Levels {
		keepLevels[l.Name] = true
	}
	return prune(ctx, c, keep, keepLevels)
}

// prune deletes the FlowSchemas labelled ManagedBy that are not in keep,
// then the priority levels so labelled that are not in keepLevels and that
// no remaining FlowSchema points at.
func prune(ctx context.Context, c kubernetes.Interface, keep, keepLevels map[string]bool) error {
	schemas, err := c.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list flow schemas: %w", err)
	}
	managed := labels.SelectorFromSet(ManagedBy)
	for _, fs := range schemas.Items {
		if keep[fs.Name] || !managed.Matches(labels.Set(fs.Labels)) {
			keepLevels[fs.Spec.PriorityLevelConfiguration.Name] = true
			continue
		}
		err := c.FlowcontrolV1().FlowSchemas().Delete(ctx, fs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &fs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete flow schema %s: %w", fs.Name, err)
		}
	}
	levels, err := c.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{LabelSelector: managed.String()})
	if err != nil {
		return fmt.Errorf("failed to list Trellis quota's priority levels: %w", err)
	}
	for _, pl := range levels.Items {
		if keepLevels[pl.Name] {
			continue
		}
		err := c.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, pl.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pl.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete priority level %s: %w", pl.Name, err)
		}
	}
	return nil
}
