package main

import (
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run measured.
type wrkResult struct {
	reqPerSec float64
	p50, p99  time.Duration
	// errors is wrk's count of non-2xx answers and socket errors.
	errors string
}

var (
	reqSecRE  = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	latencyRE = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	errorsRE  = regexp.MustCompile(`(?m)^\s*(Non-2xx or 3xx responses: \d+|Socket errors: .*)$`)
)

// runWrk loads url with wrk (-t2 -c64 --latency) for d, with Host: host
// when set.
func runWrk(url, host string, d time.Duration) (wrkResult, error) {
	return runWrkConns(url, host, d, 64)
}

// runWrkConns is runWrk with conns connections (one thread for one).
func runWrkConns(url, host string, d time.Duration, conns int) (wrkResult, error) {
	threads := min(conns, 2)
	args := []string{"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency"}
	if host != "" {
		args = append(args, "-H", "Host: "+host)
	}
	out, err := exec.Command("wrk", append(args, url)...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", url, err, out)
	}
	return parseWrk(string(out))
}

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := reqSecRE.FindStringSubmatch(out)
	if m == nil {
		return r, errors.New("no Requests/sec in wrk's output:\n" + out)
	}
	r.reqPerSec, _ = strconv.ParseFloat(m[1], 64)
	for _, l := range latencyRE.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(l[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[l[3]]
		if l[1] == "50" {
			r.p50 = time.Duration(math.Round(v * float64(unit)))
		} else {
			r.p99 = time.Duration(math.Round(v * float64(unit)))
		}
	}
	var errs []string
	for _, e := range errorsRE.FindAllStringSubmatch(out, -1) {
		errs = append(errs, strings.TrimSpace(e[1]))
	}
	r.errors = strings.Join(errs, "; ")
	return r, nil
}

// nginxConf chains two server blocks, hop1 -> hop2 -> backend, with
// keep-alive upstream connections (64 idle, as the Go reference and the
// agent keep), one worker per core and no access log. keepalive_requests
// lifts nginx's default of closing a connection, a client's or an
// upstream one, after 1,000 requests: the edge and the agent close none,
// and h2load counts the streams of a closed connection as failed, which
// made the h2 reference row measure reconnects.
func nginxConf(prefix, hop1, hop2, backend string) string {
	return fmt.Sprintf(`daemon off;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  upstream hop2 { server %[3]s; keepalive 64; keepalive_requests 1000000; }
  upstream backend { server %[4]s; keepalive 64; keepalive_requests 1000000; }
  server {
    listen %[2]s;
    location / { proxy_pass http://hop2; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen %[3]s;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`, prefix, hop1, hop2, backend)
}
