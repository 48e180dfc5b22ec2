package rollout

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// GroupNames are the state's groups by phase, then name.
func (st *State) GroupNames() []string {
	names := make([]string, 0, len(st.Groups))
	for n := range st.Groups {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(st.Groups[a].Strategy.Phase, st.Groups[b].Strategy.Phase), cmp.Compare(a, b))
	})
	return names
}

func (g *GroupProgress) step() string {
	switch {
	case g.Done:
		return "done"
	case g.Batch != nil:
		return fmt.Sprintf("batch %d: %s", g.Batch.N, g.Batch.Step)
	}
	return "pending"
}

// Print writes the rollout's status as a table.
func (st *State) Print(w io.Writer) {
	what := "to " + st.Image
	if st.Reason != "" {
		what = "(" + st.Reason + ")"
	}
	fmt.Fprintf(w, "Rollout %s of %s %s: %s %s\n", st.ID, st.Cluster, what, st.Status, st.Message)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tREPLACED\tSTEP\tBLOCKED BY")
	for _, name := range st.GroupNames() {
		g := st.Groups[name]
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\n", name, len(g.Replaced), len(g.Old), g.step(), g.Blocked)
	}
	_ = tw.Flush()
}
