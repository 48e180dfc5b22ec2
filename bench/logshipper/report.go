package main

import (
	"fmt"
	"sort"
)

// perCoreSecond is lines shipped per second of the process's own CPU.
func (r result) perCoreSecond() float64 { return float64(r.lines) / r.cpu.Seconds() }

// printResults prints each leg's figures, the serving processes' CPU and
// memory apart, and each shipper leg's ratio to rsyslog.
func printResults(ships []result, rs result, in input) {
	fmt.Printf("\n%d lines, %.1f MB; CPU is each process's own (user+system) while it shipped\n", in.lines(), float64(in.bytes)/1e6)
	fmt.Printf("%-72s %7s %10s %7s %14s %9s %9s\n", "", "wall s", "lines/s", "CPU s", "lines/core-s", "CPU/line", "peak RSS")
	row := func(name string, r result) {
		fmt.Printf("%-72s %7.2f %10.0f %7.2f %14.0f %7.2fµs %5.1f MiB\n", name, r.wall.Seconds(), float64(r.lines)/r.wall.Seconds(),
			r.cpu.Seconds(), r.perCoreSecond(), 1e6*r.cpu.Seconds()/float64(r.lines), float64(r.peakKiB)/1024)
	}
	for _, r := range append(ships, rs) {
		row(r.name, r)
		names := make([]string, 0, len(r.side))
		for n := range r.side {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			rss := ""
			if kb := r.sidePeakKiB[n]; kb > 0 {
				rss = fmt.Sprintf(", peak RSS %.1f MiB", float64(kb)/1024)
			}
			fmt.Printf("    %-68s CPU %6.2f s (%.2fµs/line)%s\n", n, r.side[n].Seconds(), 1e6*r.side[n].Seconds()/float64(r.lines), rss)
		}
	}
	for _, r := range ships {
		fmt.Printf("ratio %s / rsyslog, lines per core-second: %.2f (goal ≥ 1.5); wall-time throughput: %.2f\n",
			r.name, r.perCoreSecond()/rs.perCoreSecond(), rs.wall.Seconds()/r.wall.Seconds())
	}
}
