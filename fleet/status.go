package fleet

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/fleet/karmada"
)

// MemberStatus is how Karmada sees a member.
type MemberStatus struct {
	Name       string   `json:"name"`
	Ready      bool     `json:"ready"`
	Reason     string   `json:"reason,omitempty"`
	Message    string   `json:"message,omitempty"`
	Endpoint   string   `json:"endpoint"`
	Provider   string   `json:"provider,omitempty"`
	Region     string   `json:"region,omitempty"`
	Zones      []string `json:"zones,omitempty"`
	Kubernetes string   `json:"kubernetesVersion,omitempty"`
	Nodes      int64    `json:"nodes"`
	ReadyNodes int64    `json:"readyNodes"`
	// Capacity: allocatable and allocated (requests of running pods) per
	// resource, from Karmada's resource summary.
	Allocatable map[string]string `json:"allocatable,omitempty"`
	Allocated   map[string]string `json:"allocated,omitempty"`
	Taints      []string          `json:"taints,omitempty"`
}

// Status lists the fleet's members, by name.
func Status(ctx context.Context, fleet *rest.Config) ([]MemberStatus, error) {
	d, err := dynamic.NewForConfig(fleet)
	if err != nil {
		return nil, fmt.Errorf("create a client for the fleet's apiserver: %w", err)
	}
	list, err := d.Resource(karmada.ClusterGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to list the fleet's clusters: %w", err)
	}
	out := make([]MemberStatus, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, memberStatus(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func memberStatus(c *unstructured.Unstructured) MemberStatus {
	s := MemberStatus{Name: c.GetName()}
	s.Endpoint, _, _ = unstructured.NestedString(c.Object, "spec", "apiEndpoint")
	s.Provider, _, _ = unstructured.NestedString(c.Object, "spec", "provider")
	s.Region, _, _ = unstructured.NestedString(c.Object, "spec", "region")
	s.Zones, _, _ = unstructured.NestedStringSlice(c.Object, "spec", "zones")
	s.Kubernetes, _, _ = unstructured.NestedString(c.Object, "status", "kubernetesVersion")
	s.Nodes, _, _ = unstructured.NestedInt64(c.Object, "status", "nodeSummary", "totalNum")
	s.ReadyNodes, _, _ = unstructured.NestedInt64(c.Object, "status", "nodeSummary", "readyNum")
	s.Allocatable, _, _ = unstructured.NestedStringMap(c.Object, "status", "resourceSummary", "allocatable")
	s.Allocated, _, _ = unstructured.NestedStringMap(c.Object, "status", "resourceSummary", "allocated")
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, ci := range conds {
		cm, _ := ci.(map[string]any)
		if cm["type"] == "Ready" {
			s.Ready = cm["status"] == "True"
			s.Reason, _ = cm["reason"].(string)
			s.Message, _ = cm["message"].(string)
		}
	}
	taints, _, _ := unstructured.NestedSlice(c.Object, "spec", "taints")
	for _, ti := range taints {
		tm, _ := ti.(map[string]any)
		s.Taints = append(s.Taints, fmt.Sprintf("%v:%v", tm["key"], tm["effect"]))
	}
	return s
}

// WaitReady waits until Karmada reports the member Ready.
func WaitReady(ctx context.Context, fleet *rest.Config, name string, timeout time.Duration) error {
	d, err := dynamic.NewForConfig(fleet)
	if err != nil {
		return fmt.Errorf("create a client for the fleet's apiserver: %w", err)
	}
	var last MemberStatus
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		c, err := d.Resource(karmada.ClusterGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout, which reports the last state
		}
		last = memberStatus(c)
		return last.Ready, nil
	})
	if err != nil {
		return fmt.Errorf("member %s not Ready after %s (reason %q: %s): %w", name, timeout, last.Reason, last.Message, err)
	}
	return nil
}

// PrintStatus writes the members as a table.
func PrintStatus(w io.Writer, members []MemberStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tREADY\tVERSION\tNODES\tCPU (ALLOCATED/ALLOCATABLE)\tMEMORY (ALLOCATED/ALLOCATABLE)\tPODS\tREGION\tTAINTS")
	for _, m := range members {
		ready := "True"
		if !m.Ready {
			ready = "False"
			if m.Reason != "" {
				ready += " (" + m.Reason + ")"
			}
		}
		taints := strings.Join(m.Taints, ",")
		if taints == "" {
			taints = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", m.Name, ready, orDash(m.Kubernetes), m.ReadyNodes, m.Nodes,
			usage(m, "cpu"), usage(m, "memory"), usage(m, "pods"), orDash(m.Region), taints)
	}
	return tw.Flush()
}

// usage is "allocated/allocatable" of one resource, in readable units.
func usage(m MemberStatus, res string) string {
	alloc, ok := m.Allocatable[res]
	if !ok {
		return "-"
	}
	used := m.Allocated[res]
	if used == "" {
		used = "0"
	}
	return human(res, used) + "/" + human(res, alloc)
}

func human(res, q string) string {
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return q
	}
	switch res {
	case "cpu":
		return fmt.Sprintf("%.1f", float64(v.MilliValue())/1000)
	case "memory":
		return fmt.Sprintf("%.1fGi", float64(v.Value())/(1<<30))
	}
	return v.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
