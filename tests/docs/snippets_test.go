package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A snippet is one fenced block of a doc with the marker before it:
//
//	<!-- snippet: apply -->            YAML applied with kubectl apply -f -
//	<!-- snippet: run -->              a shell script that must succeed
//	<!-- snippet: output -->           "$ command" lines, each followed by
//	                                   the output it must print
//	<!-- snippet: output; any: A, B --> the same, the columns A and B not
//	                                   compared (values that change from run
//	                                   to run, such as a ClusterIP)
//	<!-- snippet: output; once -->     each command runs once: it changes
//	                                   something (else it runs again until it
//	                                   prints what is shown: statuses converge)
//	<!-- snippet: not run: why -->     not run here, for the reason given
//
// Every fenced block of README.md and docs/*.md has one.
type snippet struct {
	doc  string // repository-relative path
	line int    // of the opening fence, 1-based
	lang string
	// mode is modeApply, modeRun, modeOutput or modeNotRun.
	mode string
	// why says why a snippet is not run.
	why string
	// any are the columns of an output table that are not compared.
	any []string
	// once runs an output snippet's commands once each: they change
	// something. Without it a command runs again until it prints what is
	// shown (a status converges), within a bound.
	once bool
	body string
}

const (
	modeApply  = "apply"
	modeRun    = "run"
	modeOutput = "output"
	modeNotRun = "not run"
)

func (s snippet) String() string { return fmt.Sprintf("%s:%d (%s)", s.doc, s.line, s.mode) }

var (
	fenceOpen = regexp.MustCompile("^(\\s*)```+\\s*([A-Za-z0-9_-]*)\\s*$")
	marker    = regexp.MustCompile(`^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$`)
)

// parseDoc returns the fenced blocks of a Markdown file. A block without
// a marker has mode "".
func parseDoc(root, doc string) ([]snippet, error) {
	f, err := os.Open(filepath.Join(root, doc))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var (
		out     []snippet
		lines   []string
		cur     *snippet
		indent  string
		lastTxt string // the last non-blank line outside a block
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if cur != nil {
			if t := strings.TrimSpace(line); len(t) >= 3 && strings.Trim(t, "`") == "" {
				cur.body = strings.Join(lines, "\n")
				if len(lines) > 0 {
					cur.body += "\n"
				}
				out = append(out, *cur)
				cur, lines, lastTxt = nil, nil, ""
				continue
			}
			lines = append(lines, strings.TrimPrefix(line, indent))
			continue
		}
		if m := fenceOpen.FindStringSubmatch(line); m != nil {
			cur = &snippet{doc: doc, line: n, lang: m[2]}
			indent = m[1]
			if mm := marker.FindStringSubmatch(lastTxt); mm != nil {
				if err := cur.setMarker(mm[1]); err != nil {
					return nil, fmt.Errorf("%s:%d: %w", doc, n, err)
				}
			}
			continue
		}
		if strings.TrimSpace(line) != "" {
			lastTxt = line
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the fenced block is not closed", doc, cur.line)
	}
	return out, sc.Err()
}

func (s *snippet) setMarker(m string) error {
	switch {
	case m == modeApply, m == modeRun, m == modeOutput:
		s.mode = m
	case strings.HasPrefix(m, modeOutput+";"):
		s.mode = modeOutput
		for _, opt := range strings.Split(strings.TrimPrefix(m, modeOutput+";"), ";") {
			opt = strings.TrimSpace(opt)
			if opt == "once" {
				s.once = true
				continue
			}
			cols, ok := strings.CutPrefix(opt, "any:")
			if !ok {
				return fmt.Errorf("unknown option of an output snippet: %q (once, or any: COLUMN, ...)", opt)
			}
			for _, c := range strings.Split(cols, ",") {
				s.any = append(s.any, strings.TrimSpace(c))
			}
		}
	case strings.HasPrefix(m, modeNotRun+":"):
		s.mode = modeNotRun
		s.why = strings.TrimSpace(strings.TrimPrefix(m, modeNotRun+":"))
		if s.why == "" {
			return fmt.Errorf("a snippet not run says why: <!-- snippet: not run: REASON -->")
		}
	default:
		return fmt.Errorf("unknown snippet marker %q: apply, run, output[; any: COLUMNS] or not run: REASON", m)
	}
	return nil
}

// command is one "$ command" of an output snippet and what it prints.
type command struct {
	cmd, want string
}

// commands splits an output snippet into its commands; a command line
// ending in \ continues on the next one.
func commands(body string) ([]command, error) {
	var out []command
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "$ ")
		if !ok {
			if len(out) == 0 {
				return nil, fmt.Errorf("an output snippet starts with a \"$ command\" line, not %q", lines[i])
			}
			out[len(out)-1].want += lines[i] + "\n"
			continue
		}
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + "\n" + lines[i]
		}
		out = append(out, command{cmd: cmd})
	}
	return out, nil
}
