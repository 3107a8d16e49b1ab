package link

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{8}, 32)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	tok, l, err := Sign(key, Link{Host: "app.example.com", Path: "/reports/", Expires: exp, Uses: 3})
	if err != nil {
		t.Fatal(err)
	}
	if l.ID == "" {
		t.Fatal("no id given")
	}
	got, i, err := Verify(tok, [][]byte{other, key})
	if err != nil || i != 1 {
		t.Fatalf("Verify = %v, key %d", err, i)
	}
	if got.Host != "app.example.com" || got.Path != "/reports/" || got.Uses != 3 || !got.Expires.Equal(exp.Truncate(time.Second)) || got.ID != l.ID {
		t.Fatalf("link read back as %+v", got)
	}
	if _, _, err := Verify(tok, [][]byte{other}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a token checked with another key: %v", err)
	}
	// Any changed byte of the payload or the MAC fails.
	p, s, _ := strings.Cut(tok, ".")
	tampered := []string{
		strings.Replace(p, p[5:6], string(rune(p[5]^1)), 1) + "." + s,
		p + "." + s[:len(s)-2] + "AA",
		p,
		"",
		"." + s,
	}
	for _, bad := range tampered {
		if _, _, err := Verify(bad, [][]byte{key}); !errors.Is(err, ErrInvalid) {
			t.Errorf("tampered token %q: %v", bad, err)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	exp := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		key []byte
		l   Link
	}{
		{key[:31], Link{Host: "h", Path: "/", Expires: exp}},
		{key, Link{Path: "/", Expires: exp}},
		{key, Link{Host: "h", Path: "x", Expires: exp}},
		{key, Link{Host: "h", Path: "//evil.example/", Expires: exp}},
		{key, Link{Host: "h", Path: "/"}},
		{key, Link{Host: "h", Path: "/", Expires: exp, Uses: -1}},
	} {
		if _, _, err := Sign(tc.key, tc.l); err == nil {
			t.Errorf("Sign(%d-byte key, %+v) took it", len(tc.key), tc.l)
		}
	}
}
