package apiwire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// FingerprintPrefix starts every certificate fingerprint: "sha256:" and 64
// lower-case hex digits, as `tuna-edge api-fingerprint` prints it.
const FingerprintPrefix = "sha256:"

// Fingerprint returns the "sha256:HEX" fingerprint of a DER certificate.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return FingerprintPrefix + hex.EncodeToString(sum[:])
}

// ParseFingerprint normalises a pinned fingerprint. It takes "sha256:" and
// 64 hex digits in either case, with or without colons between the bytes
// (as openssl x509 -fingerprint -sha256 prints them).
func ParseFingerprint(s string) (string, error) {
	hexPart, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(s)), FingerprintPrefix)
	raw, err := hex.DecodeString(strings.ReplaceAll(hexPart, ":", ""))
	if !ok || err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("invalid certificate fingerprint %q: want %s and 64 hex digits, as `tuna-edge api-fingerprint` prints it", s, FingerprintPrefix)
	}
	return FingerprintPrefix + hex.EncodeToString(raw), nil
}
