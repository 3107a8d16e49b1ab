package main

import (
	"fmt"
	"time"
)

const idleBench = "edge memory per idle session"

// idleSection measures the edge's resident memory before and after b.idle
// idle sessions (one http tunnel each, as the agent runs one per Tunnel)
// are open. The keys are issued before the first reading, so the figure is
// the sessions', not the API's.
func (b *bench) idleSection() error {
	if b.idle < 1 {
		return fmt.Errorf("-idle %d: want at least 1", b.idle)
	}
	e, err := b.startEdge("edge-idle")
	if err != nil {
		return err
	}
	defer e.stop()
	step("idle: issuing %d tunnel keys", b.idle)
	keys, err := e.httpKeys("idle", b.idle)
	if err != nil {
		return err
	}
	before, err := settledRSS(e.pid())
	if err != nil {
		return err
	}
	step("idle: opening %d sessions", b.idle)
	load := loadavg()
	a, err := b.startAgent(e, "agent-idle", "http", "127.0.0.1:9", keys, 1)
	if err != nil {
		return err
	}
	defer a.stop()
	after, err := settledRSS(e.pid())
	if err != nil {
		return err
	}
	agentRSS, err := rssKB(a.pid())
	if err != nil {
		return err
	}
	per := float64(after-before) / float64(b.idle)
	b.rows = append(b.rows, row{bench: idleBench, path: fmt.Sprintf("tuna-edge, %d sessions", b.idle),
		value: per, unit: "KiB/session", noRatio: true, load: load,
		note: fmt.Sprintf("VmRSS %d KiB before, %d KiB after; the agent process: %d KiB in all", before, after, agentRSS)})
	return nil
}

// settledRSS reads VmRSS once it has stopped moving: a few readings 500 ms
// apart that differ by less than 1%, or the last of ten.
func settledRSS(pid int) (int, error) {
	prev, err := rssKB(pid)
	if err != nil {
		return 0, err
	}
	for range 10 {
		time.Sleep(500 * time.Millisecond)
		cur, err := rssKB(pid)
		if err != nil {
			return 0, err
		}
		if d := cur - prev; d*100 < prev && -d*100 < prev {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}
