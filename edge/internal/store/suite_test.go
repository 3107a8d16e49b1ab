package store

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/etcdcluster"
)

// The store's behavioural tests form one suite that runs against each
// backend: bbolt, and etcd on a real three-member cluster on loopback.
// A test gets an opener of fresh, empty state; calling it again opens the
// same state anew, as a restarted edge would.

var (
	etcd    *etcdcluster.Cluster
	etcdErr error
	prefixN atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "store-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	etcd, etcdErr = etcdcluster.Start(dir, 3)
	code := m.Run()
	if etcd != nil {
		etcd.Close()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type opener func(t *testing.T) *Store

type backendCase struct {
	name  string
	fresh func(t *testing.T) opener
}

var backends = []backendCase{
	{"bbolt", func(t *testing.T) opener {
		dir := t.TempDir()
		return func(t *testing.T) *Store {
			t.Helper()
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}},
	{"etcd", func(t *testing.T) opener {
		prefix := fmt.Sprintf("/test/%s-%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixN.Add(1))
		return func(t *testing.T) *Store {
			t.Helper()
			s, err := OpenEtcd(etcdConfig(t, prefix))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}},
}

func etcdConfig(t *testing.T, prefix string) EtcdConfig {
	t.Helper()
	if etcdErr != nil {
		t.Fatalf("the test etcd cluster did not start: %v", etcdErr)
	}
	return EtcdConfig{Endpoints: etcd.Endpoints(), Prefix: prefix, OpTimeout: 10 * time.Second}
}

// eachBackend runs test once per backend, each on fresh state.
func eachBackend(t *testing.T, test func(t *testing.T, open opener)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.fresh(t)) })
	}
}
