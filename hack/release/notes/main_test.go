package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const changelog = `# Changelog

All notable changes to this project are documented here.

## [Unreleased]

### Added
- Something not released yet.

## [1.2.0] - 2026-02-01

### Added
- Version stamps in every binary.

### Fixed
- A fix.

## [1.1.0-rc.1] - 2026-01-15
- A release candidate.

## v1.0.0 (2026-01-01)

- The first release.
## [0.9.0] - 2025-12-01

[Unreleased]: https://code.tuna.am/tuna/k8s-operator/compare/v1.2.0...HEAD
[1.2.0]: https://code.tuna.am/tuna/k8s-operator/compare/v1.1.0...v1.2.0
`

func TestSection(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		{"v1.2.0", "### Added\n- Version stamps in every binary.\n\n### Fixed\n- A fix.\n"},
		{"1.2.0", "### Added\n- Version stamps in every binary.\n\n### Fixed\n- A fix.\n"},
		{"v1.1.0-rc.1", "- A release candidate.\n"},
		// A heading without brackets, and a next heading with no blank line.
		{"v1.0.0", "- The first release.\n"},
	} {
		got, err := Section([]byte(changelog), c.version)
		if err != nil || got != c.want {
			t.Errorf("Section(%s) = %q, %v; want %q", c.version, got, err, c.want)
		}
	}
}

func TestSectionRefused(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		// 1.2 must not match 1.2.0, nor a prefix of another version.
		{"v1.2", `no section for v1.2: before tagging, rename "## [Unreleased]" to "## [1.2] - YYYY-MM-DD"`},
		{"v3.0.0", "no section for v3.0.0"},
		// Only link definitions follow the last heading: no notes.
		{"v0.9.0", "the section for v0.9.0 is empty"},
		{"", "no version given"},
	} {
		got, err := Section([]byte(changelog), c.version)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Section(%q) = %q, %v; want an error containing %q", c.version, got, err, c.want)
		}
	}
}

// TestProjectChangelog checks the project's own CHANGELOG.md parses: its
// Unreleased section is what the next release's notes grow from.
func TestProjectChangelog(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := Section(data, "Unreleased")
	if err != nil || !strings.HasPrefix(notes, "### ") {
		t.Fatalf("the Unreleased section: %.80q, %v", notes, err)
	}
}
