package store

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fill writes one record of every kind, and enough tunnel keys to need
// several target transactions.
func fill(t *testing.T, s *Store) {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateAPIKey(APIKey{ID: "a1", Scopes: []string{"full"}, Hash: []byte{1, 2}, CreatedAt: now}))
	for i := range 2*migrateBatch + 7 {
		must(s.IssueTunnelKey(TunnelKey{ID: fmt.Sprintf("t%03d", i), Protocol: "http",
			Address: fmt.Sprintf("h%d.tuna.example", i%5), Owner: "c/ns", Hash: []byte{3}, CreatedAt: now}, true))
	}
	must(s.CreateDomain(Domain{Name: "www.example.org", Custom: true, Token: "tok", Ownership: Ownership{Owner: "c/ns"}}))
	_, err := s.CreateTCPEndpoint(TCPEndpoint{Alias: "db", CreatedAt: now}, lowestFree(100, 110))
	must(err)
	_, _, _, err = s.PutSecret("app/db", func(*SealedSecret, int) (*SealedSecret, error) {
		return &SealedSecret{SecretMeta: SecretMeta{Version: 1, Keys: []string{"password"}, KeyID: "k1"},
			Nonce: []byte("nonce"), Ciphertext: []byte("sealed bytes")}, nil
	})
	must(err)
	// A certificate an operator wrote has no other source: it moves too.
	must(s.PutTLSCert(TLSCert{Host: "www.example.org", ChainPEM: []byte("chain"),
		Key: Sealed{KeyID: "k1", Nonce: []byte("n"), Data: []byte("sealed key")}, NotBefore: now, NotAfter: now.Add(time.Hour)}))
}

// dump is every record of s, by bucket and key.
func dump(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.be.view(func(tx tx) error {
		for _, b := range dataBuckets {
			if err := tx.each(b, "", func(k string, v []byte) error { out[b+"/"+k] = string(v); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrateBoltToEtcd(t *testing.T) {
	src := backends[0].fresh(t)(t)
	defer src.Close()
	fill(t, src)
	want := dump(t, src)
	if _, ok := want[bucketTLSCerts+"/www.example.org"]; !ok {
		t.Fatalf("the source's certificate is not among the migrated records: %v", want)
	}

	prefix := fmt.Sprintf("/test/migrate-%d/", prefixN.Add(1))
	dst, err := OpenEtcd(etcdConfig(t, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	rep, err := src.MigrateTo(dst)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total() != len(want) || rep.Copied[bucketTunnelKeys] != 2*migrateBatch+7 {
		t.Fatalf("report %+v, want %d records", rep, len(want))
	}
	if got := dump(t, dst); !reflect.DeepEqual(got, want) {
		t.Fatalf("target holds %d records, want the source's %d byte for byte", len(got), len(want))
	}
	// The records work on the target: the rules see the claims.
	err = dst.IssueTunnelKey(TunnelKey{ID: "x", Protocol: "http", Address: "h1.tuna.example", Owner: "other/ns"}, true)
	var owned *OwnedError
	if !errors.As(err, &owned) {
		t.Fatalf("a migrated claim is not enforced: %v", err)
	}

}

func TestMigrateIsIdempotentAndRefusesOtherState(t *testing.T) {
	src := backends[0].fresh(t)(t)
	defer src.Close()
	fill(t, src)
	prefix := fmt.Sprintf("/test/migrate-%d/", prefixN.Add(1))
	dst, err := OpenEtcd(etcdConfig(t, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := src.MigrateTo(dst); err != nil {
		t.Fatal(err)
	}
	rep, err := src.MigrateTo(dst)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Copied); n != 0 || rep.Total() != len(dump(t, src)) {
		t.Fatalf("second run copied %v, want nothing copied and everything present (%+v)", rep.Copied, rep)
	}

	// A target with a record of its own is refused, and left as it was.
	if err := dst.CreateDomain(Domain{Name: "mine.example.org"}); err != nil {
		t.Fatal(err)
	}
	before := dump(t, dst)
	_, err = src.MigrateTo(dst)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Count != 1 || conflict.Examples[0] != "domains/mine.example.org" {
		t.Fatalf("migrating into a target with other state: %v, want a conflict naming domains/mine.example.org", err)
	}
	if after := dump(t, dst); !reflect.DeepEqual(after, before) {
		t.Fatal("a refused migration changed the target")
	}
}
