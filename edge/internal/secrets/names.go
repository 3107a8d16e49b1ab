package secrets

import (
	"fmt"
	"regexp"
	"strings"
)

// Limits of a secret. Names and keys follow Kubernetes (253 characters),
// so a secret maps onto a Kubernetes Secret without renaming; the value
// limit keeps one secret well inside the API's 1 MiB body once base64'd.
const (
	MaxNameLen    = 253
	MaxKeyLen     = 253
	MaxValueBytes = 256 << 10
)

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?$`)
	prefixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*$`)
	keyRE    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

// CheckName validates a secret's name: lower-case letters, digits and
// '.', '_', '-', '/', starting and ending with a letter or digit, with no
// empty ("//") or ".." segment, so a name reads like a path and never
// escapes one when a client maps it onto files.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("secret name must be 1-%d characters", MaxNameLen)
	}
	if !nameRE.MatchString(name) {
		return fmt.Errorf("secret name %q: use lower-case letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit", name)
	}
	return checkSegments("secret name", name)
}

// CheckPrefix validates an API key's secret prefix: the start of a valid
// name, such as "team-a/" or "team-a-".
func CheckPrefix(prefix string) error {
	if len(prefix) > MaxNameLen {
		return fmt.Errorf("secret prefix is longer than %d characters", MaxNameLen)
	}
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("secret prefix %q: use lower-case letters, digits, '.', '_', '-' and '/', starting with a letter or digit", prefix)
	}
	return checkSegments("secret prefix", prefix)
}

func checkSegments(what, s string) error {
	if strings.Contains(s, "//") {
		return fmt.Errorf("%s %q has an empty segment (\"//\")", what, s)
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == ".." {
			return fmt.Errorf("%s %q has a \"..\" segment", what, s)
		}
	}
	return nil
}

// CheckData validates a secret's data: at least one key, keys as in a
// Kubernetes Secret, values of at most MaxValueBytes in all. A too large
// total is an *TooLargeError, so the API can answer 413.
func CheckData(data map[string][]byte) error {
	if len(data) == 0 {
		return fmt.Errorf("data must hold at least one key")
	}
	total := 0
	for k, v := range data {
		if k == "" || len(k) > MaxKeyLen || !keyRE.MatchString(k) {
			return fmt.Errorf("data key %q: use 1-%d letters, digits, '-', '_' or '.', as in a Kubernetes Secret", k, MaxKeyLen)
		}
		total += len(v)
	}
	if total > MaxValueBytes {
		return &TooLargeError{Size: total}
	}
	return nil
}

// TooLargeError is data whose values exceed MaxValueBytes together.
type TooLargeError struct{ Size int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the values of a secret may hold %d bytes (256 KiB) in all; these hold %d", MaxValueBytes, e.Size)
}
