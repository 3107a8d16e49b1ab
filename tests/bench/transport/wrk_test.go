package main

import (
	"strings"
	"testing"
	"time"
)

const wrkOutput = `Running 10s test @ http://127.0.0.1:21001/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.21ms  403.12us  12.01ms   80.00%
    Req/Sec    26.51k     1.20k   29.10k    71.00%
  Latency Distribution
     50%  1.15ms
     75%  1.40ms
     90%  1.71ms
     99%  2.50ms
  527541 requests in 10.00s, 70.43MB read
  Non-2xx or 3xx responses: 12
Requests/sec:  52751.29
Transfer/sec:      7.04MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if r.reqPerSec != 52751.29 || r.p50 != 1150*time.Microsecond || r.p99 != 2500*time.Microsecond {
		t.Fatalf("parsed %+v", r)
	}
	if r.errors != "Non-2xx or 3xx responses: 12" {
		t.Fatalf("errors %q", r.errors)
	}
	us, err := parseWrk(strings.NewReplacer("1.15ms", "850.00us", "2.50ms", "1.02s").Replace(wrkOutput))
	if err != nil || us.p50 != 850*time.Microsecond || us.p99 != 1020*time.Millisecond {
		t.Fatalf("units: %+v %v", us, err)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Fatal("output without Requests/sec accepted")
	}
}

func TestRoleArguments(t *testing.T) {
	if err := roles["tcp-relay2"]([]string{"127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "want 3 addresses") {
		t.Fatalf("tcp-relay2 with one address: %v", err)
	}
}
