// Command echo is the node suite's backend, run in pods FROM scratch: an
// HTTP server on :8080 that answers with the pod's name and counts every
// request by its X-Request-Id (a request served twice shows in /dups), and
// a TCP echo server on :9000.
//
//	GET  /anything       -> "<pod> <METHOD> <path>"; header X-Seen: times this X-Request-Id came
//	GET  /?sleep=200ms   -> the same after a pause (requests in flight during a rollout)
//	GET  /dups           -> the X-Request-Ids seen more than once, one per line
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

func main() {
	pod, _ := os.Hostname()
	var mu sync.Mutex
	seen := map[string]int{}
	http.HandleFunc("/dups", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		var dups []string
		for id, n := range seen {
			if n > 1 {
				dups = append(dups, fmt.Sprintf("%s %d", id, n))
			}
		}
		mu.Unlock()
		sort.Strings(dups)
		for _, d := range dups {
			fmt.Fprintln(w, d)
		}
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n := 0
		if id := r.Header.Get("X-Request-Id"); id != "" {
			mu.Lock()
			seen[id]++
			n = seen[id]
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, r.Body)
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil && d > 0 && d < time.Minute {
			time.Sleep(d)
		}
		w.Header().Set("X-Seen", fmt.Sprint(n))
		fmt.Fprintf(w, "%s %s %s\n", pod, r.Method, r.URL.Path)
	})
	ln, err := net.Listen("tcp", ":9000")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				log.Fatal(err)
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	log.Fatal(http.ListenAndServe(":8080", nil)) //nolint:gosec // a test backend: the suite's clients set no slow headers
}
