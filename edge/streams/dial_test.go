package streams

import (
	"context"
	"strings"
	"testing"
)

func TestDialChecksItsArguments(t *testing.T) {
	if _, err := Dial(context.Background(), "127.0.0.1:1", "ab", "short"); err == nil {
		t.Fatal("a short token was accepted")
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1", "", strings.Repeat("a", TokenLen)); err == nil {
		t.Fatal("an empty fingerprint was accepted")
	}
}
