package localfleet_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/serverset"
)

// liveWeb counts the members of web's serverset that clients can use: an
// ALIVE registration whose host is a Ready web pod's address in a member
// cluster whose apiserver answers. A member that does not answer is lost
// (as in a lost zone): its pods do not count, although its kwok pods and
// node registrars keep their registrations while only its apiserver is
// down. It also says how many members answered.
func (e *env) liveWeb(ctx context.Context) (live, answered int, err error) {
	members, err := e.serverset("web")
	if err != nil {
		return 0, 0, err
	}
	ready := map[string]bool{}
	for _, m := range e.members {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		pods := &corev1.PodList{}
		lerr := e.cs[m].List(lctx, pods, client.InNamespace("shop"), client.MatchingLabels(inject.SelectorLabels("TrellisService", "web")))
		cancel()
		if lerr != nil {
			continue
		}
		answered++
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil && podReady(&p) {
				ready[p.Status.PodIP] = true
			}
		}
	}
	for _, s := range members {
		if s.Status == serverset.StatusAlive && ready[s.ServiceEndpoint.Host] {
			live++
		}
	}
	return live, answered, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// liveSampler samples liveWeb every 100 ms until stopped, and reports the
// lowest count, how many samples it took and how many errored.
type liveSampler struct {
	stop chan struct{}
	done chan liveSamples
}

type liveSamples struct {
	lowest, samples, errored int
	took                     time.Duration
	lowestAt                 string
}

func (e *env) sampleLiveWeb(ctx context.Context) *liveSampler {
	s := &liveSampler{stop: make(chan struct{}), done: make(chan liveSamples, 1)}
	go func() {
		r := liveSamples{lowest: 1 << 30}
		start := time.Now()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				r.took = time.Since(start)
				s.done <- r
				return
			case <-tick.C:
			}
			live, answered, err := e.liveWeb(ctx)
			if err != nil {
				r.errored++
				continue
			}
			r.samples++
			if live < r.lowest {
				r.lowest, r.lowestAt = live, fmt.Sprintf("%s after the start, %d of %d members answering", time.Since(start).Round(100*time.Millisecond), answered, len(e.members))
			}
		}
	}()
	return s
}

// result stops the sampler and returns what it saw.
func (s *liveSampler) result() liveSamples {
	close(s.stop)
	return <-s.done
}
