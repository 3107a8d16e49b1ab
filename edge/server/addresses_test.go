package server

import (
	"fmt"
	"testing"
)

func TestParseAddresses(t *testing.T) {
	ok := map[string]string{
		"":                                   "[]",
		"192.0.2.1":                          "[192.0.2.1]",
		"192.0.2.254-192.0.3.1, 192.0.2.255": "[192.0.2.254 192.0.2.255 192.0.3.0 192.0.3.1]",
		"2001:db8::1-2001:db8::2":            "[2001:db8::1 2001:db8::2]",
	}
	for in, want := range ok {
		got, err := ParseAddresses(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%q: %v %v, want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"nope", "192.0.2.9-192.0.2.1", "192.0.2.1-2001:db8::1", "10.0.0.0-10.0.255.255"} {
		if got, err := ParseAddresses(in); err == nil {
			t.Errorf("%q: %v, want an error", in, got)
		}
	}
}
