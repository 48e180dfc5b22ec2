// Package enilimits knows every EC2 instance type's network limits (ENIs,
// IPv4 addresses per ENI), with its vCPUs, memory and architectures, from
// an embedded table: rendering a cluster's kops specs stays offline and
// deterministic. The table is EC2's DescribeInstanceTypes as the AWS API
// emulator serves it (`go generate`, see gen/), and netd reads the same
// limits from EC2 itself at run time.
package enilimits

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

//go:generate go run ./gen -o limits.tsv

//go:embed limits.tsv
var table string

// Limits are an instance type's network limits: how many ENIs it takes and
// how many private IPv4 addresses each holds (its primary one included).
type Limits struct {
	ENIs            int
	AddressesPerENI int
}

// PodAddresses is how many pod addresses an instance holds: every ENI's
// secondary addresses.
func (l Limits) PodAddresses() int { return l.ENIs * (l.AddressesPerENI - 1) }

// MaxPods is the kubelet's maxPods for the instance type: its pod
// addresses plus two for the host-network daemons every node runs, the
// formula kops and the AWS VPC CNI use (capped at the kubelet's default
// 110, as kops caps it).
func (l Limits) MaxPods() int { return min(l.PodAddresses()+2, 110) }

func (l Limits) String() string {
	return fmt.Sprintf("%d ENIs x %d addresses", l.ENIs, l.AddressesPerENI)
}

// Type is one row of the table.
type Type struct {
	Name   string
	Limits Limits
	VCPUs  int
	// MemoryMiB is the instance's memory.
	MemoryMiB int
	// Architectures EC2 supports for it (x86_64, arm64, i386).
	Architectures []string
}

var (
	once  sync.Once
	types map[string]Type
	err   error
)

func load() {
	types = map[string]Type{}
	for i, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if i == 0 || line == "" {
			continue // header
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			err = fmt.Errorf("enilimits: line %d: %d fields, want 6", i+1, len(f))
			return
		}
		var n [4]int
		for j := range n {
			if n[j], err = strconv.Atoi(f[j+1]); err != nil {
				err = fmt.Errorf("enilimits: line %d: %w", i+1, err)
				return
			}
		}
		types[f[0]] = Type{Name: f[0], Limits: Limits{ENIs: n[0], AddressesPerENI: n[1]}, VCPUs: n[2], MemoryMiB: n[3], Architectures: strings.Split(f[5], ",")}
	}
}

// Lookup returns an instance type's row.
func Lookup(name string) (Type, bool) {
	once.Do(load)
	t, ok := types[name]
	return t, ok && err == nil
}

// All returns every row, by name.
func All() ([]Type, error) {
	once.Do(load)
	if err != nil {
		return nil, err
	}
	out := make([]Type, 0, len(types))
	for _, t := range types {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Type) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
