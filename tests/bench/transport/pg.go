package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const pgBench = "pgbench -S, 16 clients"

// postgres is a PostgreSQL server the benchmark started in a temporary
// folder, listening on loopback only.
type postgres struct {
	bin, dir, addr string
	asUser         []string // runuser prefix when the benchmark runs as root
}

// pgOnChannels is the tcp tunnel with the edge's streams off.
const pgOnChannels = "tuna tcp tunnel, SSH channels (--no-streams)"

// pgSection runs pgbench select-only against a fresh PostgreSQL: direct,
// through a tuna tcp tunnel (on streams, then on SSH channels) and through
// the two-hop io.Copy relays.
func (b *bench) pgSection() error {
	pg, why := b.startPostgres()
	if why != "" {
		for _, p := range []string{"direct", "tuna tcp tunnel", pgOnChannels, relayOneProcess, relayTwoProcesses} {
			b.skip(pgBench, p, why)
		}
		return nil
	}
	defer pg.stop()
	step("pgbench -i -s 10")
	host, port, _ := strings.Cut(pg.addr, ":")
	if out, err := exec.Command("pgbench", "-i", "-s", "10", "-q", "-h", host, "-p", port, "-U", "postgres", "postgres").CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	direct, err := b.pgRow("direct", pg.addr, 0)
	if err != nil {
		return err
	}
	if err := b.tunaTCP("pg", pg.addr, nil, func(addr string, e *edgeProc, a *agentProc) error {
		if _, err := b.pgRow("tuna tcp tunnel", addr, direct); err != nil {
			return err
		}
		if b.profileDir == "" {
			return nil
		}
		return b.profile("pg", e, a, func(d time.Duration) error {
			_, err := b.pgbench(addr, d)
			return err
		})
	}); err != nil {
		return err
	}
	// The same endpoint on SSH channels: small round trips, as HTTP's, may
	// cost less there than on TLS streams.
	if err := b.tunaTCP("pg-channels", pg.addr, []string{"--no-streams"}, func(addr string, _ *edgeProc, _ *agentProc) error {
		_, err := b.pgRow(pgOnChannels, addr, direct)
		return err
	}); err != nil {
		return err
	}
	one, two, stop, err := b.startRelays("pg", pg.addr)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := b.pgRow(relayOneProcess, one, direct); err != nil {
		return err
	}
	_, err = b.pgRow(relayTwoProcesses, two, direct)
	return err
}

// startPostgres runs initdb and pg_ctl start; initdb refuses root, so as
// root they run as the postgres user. A missing install is a reason to
// skip, returned as why.
func (b *bench) startPostgres() (*postgres, string) {
	pg := &postgres{bin: b.pgBin}
	if _, err := os.Stat(filepath.Join(pg.bin, "initdb")); err != nil {
		return nil, "PostgreSQL 15 not installed (no " + filepath.Join(pg.bin, "initdb") + "): sudo apt-get install -y postgresql-15"
	}
	if _, err := exec.LookPath("pgbench"); err != nil {
		return nil, "pgbench not installed: sudo apt-get install -y postgresql-contrib"
	}
	dir, err := os.MkdirTemp("", "tuna-bench-pg-")
	if err != nil {
		return nil, err.Error()
	}
	pg.dir = dir
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "running as root and no postgres user to run initdb as: " + err.Error()
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err.Error()
		}
		pg.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	addrs, err := takeAddrs(1)
	if err != nil {
		return nil, err.Error()
	}
	pg.addr = addrs[0]
	_, port, _ := strings.Cut(pg.addr, ":")
	data := filepath.Join(dir, "data")
	if out, err := pg.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		return nil, fmt.Sprintf("initdb failed: %v\n%s", err, out)
	}
	// Select-only reads from memory; fsync off only speeds up pgbench -i.
	opts := "-p " + port + " -k " + dir + " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
	if out, err := pg.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "120", "start"); err != nil {
		return nil, fmt.Sprintf("pg_ctl start failed: %v\n%s", err, out)
	}
	ok = true
	return pg, ""
}

func (pg *postgres) run(tool string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, pg.asUser...), filepath.Join(pg.bin, tool)), args...)
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

func (pg *postgres) stop() {
	_, _ = pg.run("pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-m", "fast", "-w", "stop")
	_ = os.RemoveAll(pg.dir)
}

var (
	tpsRE     = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	pgLatency = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
)

func (b *bench) pgRow(path, addr string, direct float64) (float64, error) {
	step("%s: pgbench -S -c 16 -T %d", path, b.pgSeconds)
	load := loadavg()
	out, err := b.pgbench(addr, time.Duration(b.pgSeconds)*time.Second)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s: no tps in pgbench's output:\n%s", path, out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	r := row{bench: pgBench, path: path, value: tps, unit: "tps", direct: direct, load: load}
	if l := pgLatency.FindSubmatch(out); l != nil {
		ms, _ := strconv.ParseFloat(string(l[1]), 64)
		r.note = "latency average " + time.Duration(ms*float64(time.Millisecond)).String()
	}
	b.rows = append(b.rows, r)
	return tps, nil
}

// pgbench runs select-only with 16 clients against addr for d (whole
// seconds, at least one) and returns its output.
func (b *bench) pgbench(addr string, d time.Duration) ([]byte, error) {
	host, port, _ := strings.Cut(addr, ":")
	secs := max(1, int(d/time.Second))
	out, err := exec.Command("pgbench", "-S", "-c", "16", "-j", "2", "-T", strconv.Itoa(secs),
		"-h", host, "-p", port, "-U", "postgres", "postgres").CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	return out, nil
}
