package docs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// How a command's output is compared with what a doc shows:
//
//   - blank-line separated sections; a section whose first line is all
//     upper-case words (NAME, READY, PORT(S), ...) is a table, cut into
//     cells at its header's columns, on each side by its own header, so a
//     table may be aligned differently in the doc;
//   - a table's AGE column, and the snippet's "any" columns, are not
//     compared;
//   - other lines are compared word by word (runs of spaces are one);
//   - a line or cell of the doc ending in "..." matches whatever starts
//     like it, and a line "..." any number of lines.
//
// Each line or cell, once cut (tables are cut before, so that a rewrite
// does not move columns), is rewritten by norm on both sides: what
// differs from one run to the next, such as the edge's TCP ports
// (127.0.0.1:PORT), and by the caller's own rewrite.

var (
	header   = regexp.MustCompile(`^[A-Z][A-Z0-9()_-]*(\s+[A-Z][A-Z0-9()_-]*)*$`)
	loopPort = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	spaces   = regexp.MustCompile(`\s+`)
)

// matcher compares one command's output; rewrite, when set, is applied
// to every line and cell besides the TCP ports.
type matcher struct {
	any     []string
	rewrite func(string) string
}

func (m matcher) norm(s string) string {
	s = loopPort.ReplaceAllString(s, "127.0.0.1:PORT")
	if m.rewrite != nil {
		s = m.rewrite(s)
	}
	return s
}

// match reports whether got is what want shows, and where it is not.
func (m matcher) match(want, got string) error {
	ws, gs := sections(want), sections(got)
	if len(ws) != len(gs) {
		return fmt.Errorf("%d sections shown, %d printed", len(ws), len(gs))
	}
	for i := range ws {
		if err := m.matchSection(ws[i], gs[i]); err != nil {
			return err
		}
	}
	return nil
}

func sections(s string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (m matcher) matchSection(want, got []string) error {
	if header.MatchString(want[0]) && header.MatchString(got[0]) {
		return m.matchTable(want, got)
	}
	return m.matchLines(want, got)
}

func (m matcher) matchLines(want, got []string) error {
	j := 0
	for i := 0; i < len(want); i++ {
		w := want[i]
		if strings.TrimSpace(w) == "..." {
			// Skip printed lines until the next shown one matches.
			if i+1 == len(want) {
				return nil
			}
			for j < len(got) && !m.same(want[i+1], got[j]) {
				j++
			}
			continue
		}
		if j >= len(got) {
			return fmt.Errorf("shown %q, but the output ends before it", w)
		}
		if !m.same(w, got[j]) {
			return fmt.Errorf("shown:\n  %s\nprinted:\n  %s", w, got[j])
		}
		j++
	}
	if j < len(got) {
		return fmt.Errorf("printed more than shown, from:\n  %s", got[j])
	}
	return nil
}

// same compares a line or cell: spaces collapsed, both normalised, and
// a shown "..." at the end matching any rest.
func (m matcher) same(want, got string) bool {
	w := spaces.ReplaceAllString(strings.TrimSpace(m.norm(want)), " ")
	g := spaces.ReplaceAllString(strings.TrimSpace(m.norm(got)), " ")
	if p, ok := strings.CutSuffix(w, "..."); ok {
		return strings.HasPrefix(g, strings.TrimRight(p, " ")) || g == strings.TrimRight(p, " ")
	}
	return w == g
}

func (m matcher) matchTable(want, got []string) error {
	wh, gh := strings.Fields(want[0]), strings.Fields(got[0])
	if !slices.Equal(wh, gh) {
		return fmt.Errorf("columns shown %v, printed %v", wh, gh)
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d rows shown, %d printed:\n%s", len(want)-1, len(got)-1, strings.Join(got, "\n"))
	}
	wcols, gcols := columns(want[0]), columns(got[0])
	for r := 1; r < len(want); r++ {
		wc, gc := cells(want[r], wcols), cells(got[r], gcols)
		for c, name := range wh {
			if name == "AGE" || slices.Contains(m.any, name) {
				continue
			}
			if !m.same(wc[c], gc[c]) {
				return fmt.Errorf("row %d, column %s: shown %q, printed %q\n%s", r, name, wc[c], gc[c], strings.Join(got, "\n"))
			}
		}
	}
	return nil
}

// columns are the offsets where a header's columns start.
func columns(header string) []int {
	var out []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			out = append(out, i)
		}
	}
	return out
}

// cells cuts a row at the columns; the last cell runs to the end.
func cells(row string, cols []int) []string {
	out := make([]string, len(cols))
	for i, start := range cols {
		if start >= len(row) {
			continue
		}
		end := len(row)
		if i+1 < len(cols) && cols[i+1] < len(row) {
			end = cols[i+1]
		}
		out[i] = strings.TrimSpace(row[start:end])
	}
	return out
}
