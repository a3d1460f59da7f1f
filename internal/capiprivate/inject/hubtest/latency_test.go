package hubtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
)

// TestAdmissionLatency measures what the injector adds to Pod admission: the same cluster-api Pod created,
// alternately, in a namespace the webhook selects and in one it does not (INJECT_LATENCY_PODS pairs, default
// 100), timing each create as a client sees it.
func TestAdmissionLatency(t *testing.T) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("INJECT_LATENCY_PODS")); err == nil && v > 0 {
		n = v
	}
	marked := namespace(t, "latency", main.name, true)
	plain := namespace(t, "latency-plain", main.name, false)
	fm, _ := injecttest.Load("cluster-api", marked)
	fp, _ := injecttest.Load("cluster-api", plain)
	create(t, fm.ServiceAccount)
	create(t, fp.ServiceAccount)
	var with, without []time.Duration
	ctx := context.Background()
	sum0, n0 := main.counter(t, "capi_private_inject_decision_duration_seconds_sum"), main.counter(t, "capi_private_inject_decision_duration_seconds_count")
	for i := range n {
		for _, c := range []struct {
			f   *injecttest.Fixture
			out *[]time.Duration
		}{{fm, &with}, {fp, &without}} {
			pod := c.f.Pod(fmt.Sprintf("latency-%d", i))
			start := time.Now()
			if err := env.Client.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			*c.out = append(*c.out, time.Since(start))
			if inject.PodInjected(pod) != (c.f == fm) {
				t.Fatalf("pod %s/%s: injected %v", pod.Namespace, pod.Name, inject.PodInjected(pod))
			}
		}
	}
	pw, pwo := percentiles(with), percentiles(without)
	sum, count := main.counter(t, "capi_private_inject_decision_duration_seconds_sum")-sum0, main.counter(t, "capi_private_inject_decision_duration_seconds_count")-n0
	t.Logf("Pod create, %d each: with injection p50 %v p99 %v; without p50 %v p99 %v; added p50 %v p99 %v; the injector's own decision %v on average",
		n, pw[0], pw[1], pwo[0], pwo[1], pw[0]-pwo[0], pw[1]-pwo[1], time.Duration(sum/count*float64(time.Second)).Round(time.Microsecond))
}

// percentiles are the p50 and p99 of ds (nearest rank).
func percentiles(ds []time.Duration) [2]time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return [2]time.Duration{at(0.50).Round(10 * time.Microsecond), at(0.99).Round(10 * time.Microsecond)}
}
