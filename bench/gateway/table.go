package main

import (
	"fmt"
	"time"
)

// table prints the run's figures as the Markdown rows of
// docs/benchmarks/gateway.md.
func (b *bench) table() {
	for _, r := range b.submits {
		s := r.sum
		t := func(k string, p float64) float64 { return pct(s.timing[k], p) }
		fmt.Printf("| %.0f submissions/s for %s | p50 | p99 | target |\n", r.rate, b.o.submitFor)
		fmt.Println("|---|---|---|---|")
		fmt.Printf("| answered within 30 s | %d of %d | | |\n", s.ok, s.sent)
		fmt.Printf("| gateway overhead (total − apiserver round trips − cache wait) | %.2f ms | %.2f ms | p99 < 20 ms |\n", t("gateway", 50), t("gateway", 99))
		fmt.Printf("| wait for the cache to hold the write (read-your-writes) | %.2f ms | %.2f ms | |\n", t("cache", 50), t("cache", 99))
		fmt.Printf("| overhead with the cache wait | %.2f ms | %.2f ms | |\n", t("gateway+cache", 50), t("gateway+cache", 99))
		fmt.Printf("| apiserver round trips (dry run, write, reviews) | %.2f ms | %.2f ms | |\n", t("apiserver", 50), t("apiserver", 99))
		fmt.Printf("| total in the gateway | %.2f ms | %.2f ms | |\n", t("total", 50), t("total", 99))
		fmt.Printf("| client latency | %.2f ms | %.2f ms | |\n", ms(pct(s.lat, 50)), ms(pct(s.lat, 99)))
		fmt.Printf("| trellis-gateway CPU per submission it answered | %.2f ms | | |\n\n", ms(r.cpu)/max(1, r.handled))
	}

	g, d := b.gwReads, b.dirReads
	cpu := func(x time.Duration, wall time.Duration) string {
		return fmt.Sprintf("%.1f s (%.0f%%)", x.Seconds(), 100*x.Seconds()/wall.Seconds())
	}
	fmt.Printf("| %.0f reads/s for %s | through the gateway | directly against kube-apiserver |\n", b.o.readRate, b.o.readFor)
	fmt.Println("|---|---|---|")
	fmt.Printf("| answered | %d of %d (%.0f/s) | %d of %d (%.0f/s) |\n", g.sum.ok, g.sum.sent, g.achieved, d.sum.ok, d.sum.sent, d.achieved)
	fmt.Printf("| latency p50 / p99 | %.2f / %.2f ms | %.2f / %.2f ms |\n", ms(pct(g.sum.lat, 50)), ms(pct(g.sum.lat, 99)), ms(pct(d.sum.lat, 50)), ms(pct(d.sum.lat, 99)))
	fmt.Printf("| apiserver requests caused | %d | %d |\n", g.byCaller, d.byCaller)
	fmt.Printf("| apiserver requests, all clients | %d | %d |\n", g.byAll, d.byAll)
	fmt.Printf("| kube-apiserver CPU | %s | %s |\n", cpu(g.apiserverCPU, g.sum.wall), cpu(d.apiserverCPU, d.sum.wall))
	fmt.Printf("| etcd CPU | %s | %s |\n", cpu(g.etcdCPU, g.sum.wall), cpu(d.etcdCPU, d.sum.wall))
	fmt.Printf("| trellis-gateway CPU | %s | %s |\n", cpu(g.gwCPU, g.sum.wall), cpu(d.gwCPU, d.sum.wall))
	fmt.Printf("| load generator CPU | %s | %s |\n", cpu(g.benchCPU, g.sum.wall), cpu(d.benchCPU, d.sum.wall))
	fmt.Printf("| CPU per read answered, of the process serving it | trellis-gateway %.2f ms (%.0f reads) | kube-apiserver %.2f ms (%d reads) |\n",
		ms(g.gwCPU)/max(1, g.handled), g.handled, ms(d.apiserverCPU)/float64(max(1, d.byCaller)), d.byCaller)
	fmt.Printf("\n| trellis-gateway memory, %d workloads cached | RSS | Go heap in use |\n|---|---|---|\n", b.o.workloads)
	fmt.Printf("| idle | %.0f MiB | %.0f MiB |\n", b.rssMiB, b.heapMiB)
	fmt.Printf("| after the gateway reads (RSS) | %.0f MiB | |\n", b.rssAfterReadsMiB)
}
