// Command transport measures the data plane on loopback, side by side in
// one run: small HTTP requests (wrk), a TCP echo stream and pgbench, each
// direct to its backend, through tuna (the tuna-edge binary and the
// agent's tunnel code in processes of their own) and through plain
// reference proxies (two Go or nginx hops, a two-hop io.Copy relay); and
// the edge's memory per idle session. It prints a markdown table of every
// figure with its ratio to direct and the machine's load.
//
//	go tool task bench:transport
//	go run ./tests/bench/transport -d 10s -idle 500 [-profile dir]
//
// wrk is required (apt-get install -y wrk); nginx and PostgreSQL 15 are
// optional: their rows are marked skipped when missing. hack/bench-deps.sh
// installs them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// bench is one run's settings, binaries and results.
type bench struct {
	dir        string // temporary: data dirs, logs, configs
	edgeBin    string
	agentBin   string
	self       string // this binary, for the backend and relay roles
	duration   time.Duration
	echoBytes  int64
	pgSeconds  int
	idle       int
	profileDir string
	pgBin      string
	tls        tlsFiles
	rows       []row
	// baseline, when set, is a git revision whose tuna-edge and tunnel
	// agent run the relayed HTTP row again beside this tree's, in the same
	// run: baseEdge and baseAgent are those binaries.
	baseline            string
	baseEdge, baseAgent string
	// variant is added to the rows' paths while the baseline runs, and
	// variantName to its processes' names.
	variant, variantName string
	// metered are the processes whose CPU time and system calls per
	// request the rows record (cost.go); none when empty.
	metered []int
	// directLone is the direct figure of the HTTPS row with one
	// connection.
	directLone float64
}

func main() {
	if len(os.Args) > 1 {
		if role, ok := roles[os.Args[1]]; ok {
			if err := role(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
				os.Exit(1)
			}
			return
		}
	}
	b := &bench{}
	only := flag.String("only", "http,tcp,pg,idle,https,streams", "sections to run, comma-separated: http, tcp, pg, idle, https, streams")
	out := flag.String("out", "", "also write the table to this file")
	flag.DurationVar(&b.duration, "d", 10*time.Second, "duration of each wrk run")
	echoMiB := flag.Int64("echo-mib", 512, "MiB sent through the TCP echo server per path")
	flag.IntVar(&b.pgSeconds, "pg-seconds", 10, "duration of each pgbench run, seconds")
	flag.IntVar(&b.idle, "idle", 500, "idle sessions opened for the edge's memory figure")
	flag.StringVar(&b.profileDir, "profile", os.Getenv("TUNA_BENCH_PROFILE"),
		"write CPU profiles of the edge and the agent under load here (default $TUNA_BENCH_PROFILE; empty: none)")
	flag.StringVar(&b.pgBin, "pg-bin", "/usr/lib/postgresql/15/bin", "PostgreSQL's bin folder (initdb, pg_ctl)")
	flag.StringVar(&b.baseline, "baseline", "", "a git revision: also run the relayed HTTP row and the HTTPS h1 and h2 rows with tuna-edge and the tunnel agent built from it, before and after this tree's rows (to show what a change costs, in one run)")
	flag.Parse()
	b.echoBytes = *echoMiB << 20
	if err := b.run(strings.Split(*only, ","), *out); err != nil {
		fmt.Fprintln(os.Stderr, "transport bench:", err)
		os.Exit(1)
	}
}

func (b *bench) run(sections []string, out string) error {
	want := map[string]bool{}
	for _, s := range sections {
		switch s = strings.TrimSpace(s); s {
		case "http", "tcp", "pg", "idle", "https", "streams":
			want[s] = true
		default:
			return fmt.Errorf("-only: unknown section %q (http, tcp, pg, idle, https, streams)", s)
		}
	}
	if want["http"] || want["https"] {
		if _, err := exec.LookPath("wrk"); err != nil {
			return errors.New("wrk not installed: sudo bash hack/bench-deps.sh (it also installs nginx, h2load and PostgreSQL)")
		}
	}
	if want["https"] {
		if _, err := exec.LookPath("h2load"); err != nil {
			return errors.New("h2load not installed: sudo bash hack/bench-deps.sh (nghttp2-client)")
		}
	}
	var err error
	if b.dir, err = os.MkdirTemp("", "tuna-transport-bench-"); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(b.dir) }()
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	if b.profileDir != "" {
		if err := os.MkdirAll(b.profileDir, 0o755); err != nil {
			return err
		}
	}
	step("building tuna-edge and the tunnel agent")
	if b.edgeBin, err = goBuild(b.dir, "./edge/cmd/tuna-edge", "tuna-edge"); err != nil {
		return err
	}
	if b.agentBin, err = goBuild(b.dir, "./tests/bench/transport/tunnelagent", "tunnelagent"); err != nil {
		return err
	}
	if b.baseline != "" {
		step("building tuna-edge and the tunnel agent at %s", b.baseline)
		if b.baseEdge, b.baseAgent, err = buildAt(b.dir, b.baseline); err != nil {
			return err
		}
	}
	start := loadavg()
	for _, s := range []struct {
		name string
		fn   func() error
	}{{"http", b.httpSection}, {"tcp", b.tcpSection}, {"pg", b.pgSection}, {"idle", b.idleSection}, {"https", b.httpsSection}, {"streams", b.streamsSection}} {
		if !want[s.name] {
			continue
		}
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	table := b.table(start, loadavg())
	fmt.Print("\n" + table)
	if out != "" {
		return os.WriteFile(out, []byte(table), 0o644)
	}
	return nil
}

// step prints progress to stderr; the table goes to stdout.
func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
