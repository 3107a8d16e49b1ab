package certs

import (
	"os"
	"testing"
)

// tempDirs are removed when the tests end: fixtures shared by several
// tests and benchmarks outlive any one of them.
var tempDirs []string

func osTempDir() (string, error) {
	d, err := os.MkdirTemp("", "tuna-certs-")
	if err == nil {
		tempDirs = append(tempDirs, d)
	}
	return d, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if many != nil {
		_ = many.st.Close()
	}
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}
