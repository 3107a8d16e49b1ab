package scale

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// The apiserver's Priority and Fairness, as its own metrics say: how long
// requests waited in each priority level's queues, and how many it
// rejected, so a phase shows whether the components' Leases waited
// behind their status writes (the level they share without the chart's
// FlowSchema) or not. And the requests it served, by verb and resource,
// per Tunnel: the writes are what a cold start waits on.

// apfLevels are the levels the components' requests are in: their Leases
// (with the FlowSchema) and everything else of theirs.
var apfLevels = []string{"leader-election", "workload-low"}

// apfCounts is one scrape: by level, the requests that waited, their
// total wait, and the rejected; and the requests served, by "VERB
// resource[/subresource]".
type apfCounts struct {
	levels   map[string]struct{ waited, waitSum, rejected float64 }
	requests map[string]float64
}

func (w *world) apf() (apfCounts, error) {
	hc, err := rest.HTTPClientFor(w.cp.Config)
	if err != nil {
		return apfCounts{}, err
	}
	families, err := stats.Scrape(hc, strings.TrimSuffix(w.cp.Config.Host, "/")+"/metrics")
	if err != nil {
		return apfCounts{}, err
	}
	out := apfCounts{levels: map[string]struct{ waited, waitSum, rejected float64 }{}, requests: map[string]float64{}}
	level := func(m *dto.Metric) string { return label(m.GetLabel(), "priority_level") }
	for _, m := range families["apiserver_flowcontrol_request_wait_duration_seconds"].GetMetric() {
		c := out.levels[level(m)]
		c.waited += float64(m.GetHistogram().GetSampleCount())
		c.waitSum += m.GetHistogram().GetSampleSum()
		out.levels[level(m)] = c
	}
	for _, m := range families["apiserver_flowcontrol_rejected_requests_total"].GetMetric() {
		c := out.levels[level(m)]
		c.rejected += m.GetCounter().GetValue()
		out.levels[level(m)] = c
	}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		verb, resource := label(m.GetLabel(), "verb"), label(m.GetLabel(), "resource")
		if resource == "" || verb == "WATCH" || verb == "LIST" {
			continue // the components' informers: not per object
		}
		if sub := label(m.GetLabel(), "subresource"); sub != "" {
			resource += "/" + sub
		}
		out.requests[verb+" "+resource] += m.GetCounter().GetValue()
	}
	return out, nil
}

// apfSince says what the phase added, per level: requests, mean wait in
// the queues, rejected; and the requests per Tunnel of n, by verb and
// resource (those of at least one in 100 Tunnels).
func (w *world) apfSince(before apfCounts, n int) string {
	now, err := w.apf()
	if err != nil {
		return "APF: " + err.Error()
	}
	var parts []string
	for _, l := range apfLevels {
		a, b := now.levels[l], before.levels[l]
		n := a.waited - b.waited
		mean := 0.0
		if n > 0 {
			mean = 1000 * (a.waitSum - b.waitSum) / n
		}
		parts = append(parts, fmt.Sprintf("%s %.0f requests, mean wait %.1f ms, %.0f rejected", l, n, mean, a.rejected-b.rejected))
	}
	schema := "without the chart's FlowSchema"
	if w.flowSchema != nil {
		schema = "with the chart's FlowSchema"
	}
	var served []string
	for _, k := range slices.Sorted(maps.Keys(now.requests)) {
		if per := (now.requests[k] - before.requests[k]) / float64(n); per >= 0.01 {
			served = append(served, fmt.Sprintf("%s %.2f", k, per))
		}
	}
	return "APF (" + schema + "): " + strings.Join(parts, "; ") + "; apiserver requests per Tunnel: " + strings.Join(served, ", ")
}
