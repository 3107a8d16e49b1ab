package router

import (
	"slices"
	"strings"
)

// Routes are the table's routes in the order it tries them, its fallback
// last; a Prefix route's Path without its trailing slash. For tests and
// diagnostics that show what a host serves.
func (t *Table) Routes() []Route {
	var out []Route
	switch {
	case t.ordered != nil:
		for _, r := range t.ordered {
			out = append(out, *r)
		}
	default:
		exact := make([]Route, 0, len(t.exact))
		for _, r := range t.exact {
			exact = append(exact, *r)
		}
		slices.SortFunc(exact, func(a, b Route) int { return strings.Compare(a.Path, b.Path) })
		out = append(out, exact...)
		for _, r := range t.prefixes {
			out = append(out, *r)
		}
	}
	if t.fallback != nil {
		out = append(out, *t.fallback)
	}
	return out
}
