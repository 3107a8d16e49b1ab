package access

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"
)

// A session survives its encoding, and every shorter or longer plaintext
// is refused (the AEAD keeps others out; the decoder must not trust its
// own format either).
func TestSessionEncoding(t *testing.T) {
	s := &Session{Method: MethodOIDC, Issued: time.Unix(1_800_000_000, 0), Expires: time.Unix(1_800_003_600, 0), ID: "sid",
		Provider: "p", Subject: "u1", Email: "a@example.com", Name: "Alice", Groups: []string{"staff", "ops"}, Scope: "/r/"}
	b := s.encode()
	got, err := decodeSession(b)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, s)
	}
	for n := range len(b) {
		if _, err := decodeSession(b[:n]); err == nil {
			t.Errorf("a plaintext cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := decodeSession(append(b, 0)); err == nil {
		t.Error("a plaintext with a trailing byte decoded")
	}
}

// The decoder's varints read as encoding/binary's do, overflow included.
func FuzzSessionVarint(f *testing.F) {
	for _, seed := range [][]byte{{0}, {0x80, 1}, binary.AppendUvarint(nil, 1<<63), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2}, {0x80}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, n := binary.Uvarint(b)
		d := decoder{b: string(b)}
		got := d.uvarint()
		if n <= 0 {
			if !d.bad {
				t.Fatalf("%x: read %d, binary.Uvarint refuses it", b, got)
			}
			return
		}
		if d.bad || got != want || len(d.b) != len(b)-n {
			t.Fatalf("%x: got %d (bad %v, %d left), want %d (%d left)", b, got, d.bad, len(d.b), want, len(b)-n)
		}
	})
}

// The backend gets the client's cookies without the edge's own, in the
// order sent; a Cookie field of the edge's cookies alone is dropped.
func TestStripOwnCookies(t *testing.T) {
	for _, c := range []struct {
		in, kept string
		found    bool
	}{
		{"theme=dark", "theme=dark", false},
		{"tuna-session=v", "", true},
		{"theme=dark; tuna-session=v;lang=en", "theme=dark; lang=en", true},
		{"__Host-tuna-session=v; tuna-login-x=s; a=1", "a=1", true},
		{"a=1;  ; b=tuna-session", "a=1; b=tuna-session", false},
		{"my-tuna-session=v", "my-tuna-session=v", false},
	} {
		kept, found := stripOwnCookies(c.in)
		if kept != c.kept || found != c.found {
			t.Errorf("%q: kept %q, found %v; want %q, %v", c.in, kept, found, c.kept, c.found)
		}
	}
}
