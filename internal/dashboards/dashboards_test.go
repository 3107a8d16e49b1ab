package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The committed JSON is what this package builds: a change here without
// `go tool task generate` (or an edit of the JSON by hand) fails.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	for _, f := range Files {
		want, err := JSON(f.Build)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what internal/dashboards builds: run go tool task generate", f.Path)
		}
	}
}

// Grafana addresses panels by id and positions them on a 24-column grid:
// ids are unique, and no two panels overlap.
func TestPanelsHaveIDsAndDoNotOverlap(t *testing.T) {
	for _, f := range Files {
		b, err := JSON(f.Build)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string `json:"uid"`
			Panels []struct {
				ID      int    `json:"id"`
				Title   string `json:"title"`
				GridPos struct{ X, Y, W, H int }
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if d.UID == "" {
			t.Errorf("%s has no uid", f.Path)
		}
		ids := map[int]string{}
		cells := map[[2]int]string{}
		for _, p := range d.Panels {
			if p.ID == 0 || ids[p.ID] != "" {
				t.Errorf("%s: panel %q has id %d (taken by %q)", f.Path, p.Title, p.ID, ids[p.ID])
			}
			ids[p.ID] = p.Title
			if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 || p.GridPos.H == 0 {
				t.Errorf("%s: panel %q at %+v does not fit the grid", f.Path, p.Title, p.GridPos)
			}
			for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
				for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
					if other := cells[[2]int{x, y}]; other != "" {
						t.Fatalf("%s: panels %q and %q overlap at %d,%d", f.Path, other, p.Title, x, y)
					}
					cells[[2]int{x, y}] = p.Title
				}
			}
		}
	}
}
