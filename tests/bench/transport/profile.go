package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// profileSeconds is the length of each CPU profile.
const profileSeconds = 10

// profile takes a CPU profile of the edge and of the agent at once while
// load runs, writes them to <profileDir>/<name>-{edge,agent}.pprof and
// their `go tool pprof -top` next to them. load gets the time to keep the
// traffic going; it starts before the profiles so they see only steady
// load.
func (b *bench) profile(name string, e *edgeProc, a *agentProc, load func(time.Duration) error) error {
	step("%s: %d s CPU profiles of the edge and the agent", name, profileSeconds)
	loadErr := make(chan error, 1)
	go func() { loadErr <- load(profileSeconds*time.Second + 2*time.Second) }()
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	targets := []struct{ who, addr string }{{"edge", e.pprofAddr}, {"agent", a.pprofAddr}}
	errs := make(chan error, len(targets))
	for _, t := range targets {
		go func() {
			path := filepath.Join(b.profileDir, name+"-"+t.who+".pprof")
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", t.addr, profileSeconds)
			if err := fetch(ctx, url, path); err != nil {
				errs <- fmt.Errorf("%s profile: %w", t.who, err)
				return
			}
			top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", path).CombinedOutput()
			if err != nil {
				errs <- fmt.Errorf("go tool pprof -top %s: %w\n%s", path, err, top)
				return
			}
			errs <- os.WriteFile(path+".top.txt", top, 0o644)
		}()
	}
	var all []error
	for range targets {
		all = append(all, <-errs)
	}
	all = append(all, <-loadErr)
	return errors.Join(all...)
}
