// Package dashboards builds the product's Grafana dashboards as code with
// the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk,
// Apache-2.0): the operator's, which the chart ships
// (chart/tuna-k8s-operator/dashboards/), and the edge's, which ships with
// the edge (edge/deploy/monitoring/). The JSON files are written from here
// by `go tool task generate`; a test fails while the committed files
// differ from what this package builds.
//
// Every query selects its series with the dashboard's variables only, so
// tests/observability can evaluate each one against a real Prometheus after
// substituting them, as Grafana would.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// File is one dashboard the product ships.
type File struct {
	// Path is the file's path in the repository. The chart's file name is
	// also the key in its ConfigMap.
	Path  string
	Build func() (dashboard.Dashboard, error)
}

// Files are every dashboard.
var Files = []File{
	{Path: "chart/tuna-k8s-operator/dashboards/tuna-k8s-operator.json", Build: Operator},
	{Path: "edge/deploy/monitoring/tuna-edge.json", Build: Edge},
}

// JSON is the file content of a dashboard: indented, with a final newline.
func JSON(build func() (dashboard.Dashboard, error)) ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep PromQL's < > & readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encoding dashboard %q: %w", deref(d.Title), err)
	}
	return buf.Bytes(), nil
}

// datasource is the dashboards' Prometheus, picked by the $datasource
// variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func datasourceVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")
}

// labelVariable is a multi-value variable of one label's values on metric.
// allValue "" lets Grafana expand All to the listed values, so selectors
// on generic series (process_*, go_*) stay limited to them.
func labelVariable(name, label, metric, allValue string) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, %s)", metric, name)
	v := dashboard.NewQueryVariableBuilder(name).Label(label).
		Query(dashboard.StringOrMap{Map: map[string]any{"query": q, "refId": name}}).Definition(q).
		Datasource(datasource).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Multi(true).IncludeAll(true).Sort(dashboard.VariableSortAlphabeticalAsc)
	if allValue != "" {
		v = v.AllValue(allValue)
	}
	return v
}

// target is one query of a panel.
type target struct{ expr, legend string }

func q(expr, legend string) target { return target{expr, legend} }

func queries(ts []target) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(ts))
	for i, t := range ts {
		b := prometheus.NewDataqueryBuilder().Expr(t.expr).RefId(string(rune('A' + i))).Datasource(datasource)
		if t.legend != "" {
			b = b.LegendFormat(t.legend)
		}
		out = append(out, b)
	}
	return out
}

// graph is a time series panel, half the width of the dashboard.
func graph(title, description, unit string, ts ...target) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource).Targets(queries(ts)).Span(12).Height(8).
		FillOpacity(10).ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
}

// bars is a graph of counts of rare events (route updates, refusals).
func bars(title, description string, ts ...target) *timeseries.PanelBuilder {
	return graph(title, description, "short", ts...).DrawStyle(common.GraphDrawStyleBars).FillOpacity(60)
}

// single is a stat panel of one figure, width w.
func single(title, description string, w uint32, t target, thresholds ...dashboard.Threshold) *stat.PanelBuilder {
	steps := append([]dashboard.Threshold{{Color: "green"}}, thresholds...)
	return stat.NewPanelBuilder().Title(title).Description(description).Datasource(datasource).
		Targets(queries([]target{t})).Span(w).Height(4).Unit("short").Decimals(0).
		GraphMode(common.BigValueGraphModeNone).ColorMode(common.BigValueColorModeValue).Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps))
}

// above is a threshold step: color from value up.
func above(value float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: cog.ToPtr(value), Color: color}
}

func row(title string) *dashboard.RowBuilder { return dashboard.NewRowBuilder(title) }

func base(uid, title, description string, tags ...string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(description).Tags(tags).
		Editable().Refresh("30s").Time("now-3h", "now").Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(datasourceVariable())
}

// build builds b and numbers its panels and rows from 1, as Grafana's
// editor would: panel links and "view panel" URLs need unique ids.
func build(b *dashboard.DashboardBuilder) (dashboard.Dashboard, error) {
	d, err := b.Build()
	if err != nil {
		return d, err
	}
	for i := range d.Panels {
		id := uint32(i + 1)
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
	}
	return d, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
