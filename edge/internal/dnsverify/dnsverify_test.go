package dnsverify_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
	"code.tuna.am/tuna/k8s-operator/edge/internal/dnsverify"
)

func TestCheck(t *testing.T) {
	dns := dnstest.Start(t)
	v := dnsverify.New(dns.Addr())
	ctx := context.Background()
	check := func() error { return v.Check(ctx, "app.example.com", "edge.tuna.localhost", "tok123") }

	err := check()
	if err == nil || !strings.Contains(err.Error(), "CNAME") || !strings.Contains(err.Error(), "TXT") {
		t.Fatalf("no records: %v", err)
	}
	dns.SetCNAME("app.example.com", "elsewhere.example.net")
	dns.SetTXT("_tuna-challenge.app.example.com", "wrong")
	if err := check(); err == nil || !strings.Contains(err.Error(), "points to elsewhere.example.net") || !strings.Contains(err.Error(), "token") {
		t.Fatalf("wrong records: %v", err)
	}
	dns.SetCNAME("app.example.com", "Edge.Tuna.Localhost")
	if err := check(); err == nil || strings.Contains(err.Error(), "CNAME") {
		t.Fatalf("right CNAME, wrong TXT: %v", err)
	}
	dns.SetTXT("_tuna-challenge.app.example.com", "other", "tok123")
	if err := check(); err != nil {
		t.Fatalf("right records: %v", err)
	}
}

func TestDisabled(t *testing.T) {
	if err := dnsverify.New("").Check(context.Background(), "a.example.com", "b", "c"); !errors.Is(err, dnsverify.ErrDisabled) {
		t.Fatalf("err = %v, want ErrDisabled", err)
	}
}
