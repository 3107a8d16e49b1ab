// Command notes prints the release notes of one version: its section of
// CHANGELOG.md (Keep a Changelog format), without the heading. The release
// workflow passes them to the GitHub release; it fails, before anything is
// published, when the section is missing or empty.
//
//	go run ./hack/release/notes v1.2.3 [CHANGELOG.md]
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: notes VERSION [CHANGELOG.md]   (VERSION as tagged: v1.2.3)")
		os.Exit(2)
	}
	path := "CHANGELOG.md"
	if len(os.Args) == 3 {
		path = os.Args[2]
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "notes:", err)
		os.Exit(1)
	}
	notes, err := Section(data, os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "notes: %s: %v\n", path, err)
		os.Exit(1)
	}
	fmt.Print(notes)
}

// heading matches a version's heading: "## [1.2.3] - 2026-01-02", also
// "## [v1.2.3]", "## 1.2.3" or "## v1.2.3 (2026-01-02)".
var heading = regexp.MustCompile(`^##\s+\[?v?([0-9A-Za-z.+-]+?)\]?(\s.*)?$`)

// linkRef is a Markdown link reference definition, "[1.2.3]: https://...",
// which Keep a Changelog puts after the last section.
var linkRef = regexp.MustCompile(`^\[[^\]]+\]:\s`)

// Section returns the body of version's section in a changelog: the lines
// after its "## " heading up to the next one, trimmed, ending in a newline.
// version may carry the tag's "v".
func Section(changelog []byte, version string) (string, error) {
	want := strings.TrimPrefix(version, "v")
	if want == "" {
		return "", errors.New("no version given")
	}
	var body []string
	found, in := false, false
	sc := bufio.NewScanner(bytes.NewReader(changelog))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			if m := heading.FindStringSubmatch(line); m != nil && m[1] == want {
				found, in = true, true
			}
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("no section for %s: before tagging, rename \"## [Unreleased]\" to \"## [%s] - YYYY-MM-DD\" (and start a new Unreleased section above it)", version, want)
	}
	// The last section is followed by the link definitions, not notes.
	for len(body) > 0 && (strings.TrimSpace(body[len(body)-1]) == "" || linkRef.MatchString(body[len(body)-1])) {
		body = body[:len(body)-1]
	}
	for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
		body = body[1:]
	}
	if len(body) == 0 {
		return "", fmt.Errorf("the section for %s is empty: say what changed", version)
	}
	return strings.Join(body, "\n") + "\n", nil
}
