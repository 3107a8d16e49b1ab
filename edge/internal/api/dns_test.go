package api_test

import (
	"context"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
)

func TestCustomDomainVerification(t *testing.T) {
	dns := dnstest.Start(t)
	f := newFixture(t, dns.Addr())
	ctx := context.Background()
	c := f.c(f.write)
	d, err := c.CreateDomain(ctx, apiwire.CreateDomain{Domain: "shop.example.org"})
	if err != nil || d.Verified || d.VerifyError == "" {
		t.Fatalf("create: %+v %v", d, err)
	}
	for _, r := range d.DNSRecords {
		if r.Type == "CNAME" {
			dns.SetCNAME(r.Name, r.Value)
		}
	}
	d, err = c.VerifyDomain(ctx, d.Name, "")
	if err != nil || d.Verified || !strings.Contains(d.VerifyError, "TXT") {
		t.Fatalf("CNAME only: %+v %v", d, err)
	}
	for _, r := range d.DNSRecords {
		if r.Type == "TXT" {
			dns.SetTXT(r.Name, r.Value)
		}
	}
	d, err = c.VerifyDomain(ctx, d.Name, "")
	if err != nil || !d.Verified || d.VerifyError != "" {
		t.Fatalf("both records: %+v %v", d, err)
	}
	if got, err := c.GetDomain(ctx, d.Name); err != nil || !got.Verified {
		t.Fatalf("verification not stored: %+v %v", got, err)
	}
}
