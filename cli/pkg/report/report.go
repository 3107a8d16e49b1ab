// Package report is the check report of `tuna-operator preflight` and
// `tuna-operator validate`, in the style of `linkerd check`: categories of
// checks, each ✓ (passed), ‼ (warning) or × (failed) with a hint, as text or
// JSON.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Result of one check.
type Result string

const (
	Success Result = "success"
	Warning Result = "warning"
	Error   Result = "error"
)

// Symbol is the mark printed for a result.
func (r Result) Symbol() string {
	switch r {
	case Success:
		return "✓"
	case Warning:
		return "‼"
	default:
		return "×"
	}
}

// Check is one line of the report.
type Check struct {
	// Description says what was checked, e.g. "the API key has scope tunnels:write".
	Description string `json:"description"`
	Result      Result `json:"result"`
	// Detail is what was found, e.g. the server version.
	Detail string `json:"detail,omitempty"`
	// Error is why the check failed or warns.
	Error string `json:"error,omitempty"`
	// Hint says what to change.
	Hint string `json:"hint,omitempty"`
}

// Category is a group of checks.
type Category struct {
	Name   string  `json:"categoryName"`
	Checks []Check `json:"checks"`
}

// Report is every category, in order.
type Report struct {
	Success    bool        `json:"success"`
	Categories []*Category `json:"categories"`
}

// Category returns the category with that name, adding it when new.
func (r *Report) Category(name string) *Category {
	for _, c := range r.Categories {
		if c.Name == name {
			return c
		}
	}
	c := &Category{Name: name}
	r.Categories = append(r.Categories, c)
	return c
}

// Add appends a check to a category.
func (r *Report) Add(category string, c Check) {
	cat := r.Category(category)
	cat.Checks = append(cat.Checks, c)
}

// OK, Warn and Fail add a check of that result.
func (r *Report) OK(category, description, detail string) {
	r.Add(category, Check{Description: description, Result: Success, Detail: detail})
}

func (r *Report) Warn(category, description, err, hint string) {
	r.Add(category, Check{Description: description, Result: Warning, Error: err, Hint: hint})
}

func (r *Report) Fail(category, description, err, hint string) {
	r.Add(category, Check{Description: description, Result: Error, Error: err, Hint: hint})
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	return r.Count(Error) > 0
}

// Count returns how many checks have the result.
func (r *Report) Count(res Result) int {
	n := 0
	for _, c := range r.Categories {
		for _, ch := range c.Checks {
			if ch.Result == res {
				n++
			}
		}
	}
	return n
}

// Finish sets Success.
func (r *Report) Finish() { r.Success = !r.Failed() }

// WriteText prints the report as `linkerd check` does.
func (r *Report) WriteText(w io.Writer) {
	r.Finish()
	for i, c := range r.Categories {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, c.Name)
		fmt.Fprintln(w, strings.Repeat("-", len([]rune(c.Name))))
		for _, ch := range c.Checks {
			line := ch.Result.Symbol() + " " + ch.Description
			if ch.Detail != "" {
				line += " (" + ch.Detail + ")"
			}
			fmt.Fprintln(w, line)
			if ch.Error != "" {
				for _, l := range strings.Split(ch.Error, "\n") {
					fmt.Fprintln(w, "    "+l)
				}
			}
			if ch.Hint != "" {
				fmt.Fprintln(w, "    hint: "+ch.Hint)
			}
		}
	}
	fmt.Fprintln(w)
	switch {
	case r.Failed():
		fmt.Fprintf(w, "Status check results are × (%s, %s)\n", count(r.Count(Error), "failed check"), count(r.Count(Warning), "warning"))
	case r.Count(Warning) > 0:
		fmt.Fprintf(w, "Status check results are ✓ (%s)\n", count(r.Count(Warning), "warning"))
	default:
		fmt.Fprintln(w, "Status check results are ✓")
	}
}

// WriteJSON prints the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	r.Finish()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Find returns the first check whose description contains s, or nil.
func (r *Report) Find(s string) *Check {
	for _, c := range r.Categories {
		for i := range c.Checks {
			if strings.Contains(c.Checks[i].Description, s) {
				return &c.Checks[i]
			}
		}
	}
	return nil
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
