package accounting

import (
	"fmt"
	"html/template"
	"strings"
)

// chartColors tell models apart; they repeat after eight models.
var chartColors = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"}

const (
	chartW, chartH   = 960, 260
	chartPadL        = 70
	chartPadB        = 28
	chartPadT        = 10
	chartLegendSpace = 22
)

// spendChart draws the spend series as stacked bars in inline SVG, so the
// page needs no script and no CDN.
func spendChart(s SpendSeries) template.HTML {
	if len(s.Starts) == 0 {
		return template.HTML(`<p class="empty">No spend in this range.</p>`)
	}
	totals := make([]uint64, len(s.Starts))
	var peak uint64
	for _, line := range s.CostNano {
		for i, v := range line {
			totals[i] += v
			peak = max(peak, totals[i])
		}
	}
	peak = max(peak, 1)
	plotW := float64(chartW - chartPadL - 10)
	plotH := float64(chartH - chartPadB - chartPadT - chartLegendSpace)
	barW := plotW / float64(len(s.Starts))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="spend-chart" role="img" aria-label="spend over time by model" viewBox="0 0 %d %d" width="100%%" xmlns="http://www.w3.org/2000/svg">`, chartW, chartH)
	axis(&b, peak, plotH)
	for i, at := range s.Starts {
		y := float64(chartPadT) + plotH
		for m, line := range s.CostNano {
			if line[i] == 0 {
				continue
			}
			h := plotH * float64(line[i]) / float64(peak)
			y -= h
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: $%s</title></rect>`,
				float64(chartPadL)+float64(i)*barW+barW*0.1, y, barW*0.8, h, chartColors[m%len(chartColors)],
				template.HTMLEscapeString(s.Models[m]), at.Format(bucketLayout(s.Bucket)), formatUSD(line[i]))
		}
	}
	xLabels(&b, s, barW, plotH)
	legend(&b, s.Models)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func axis(b *strings.Builder, peak uint64, plotH float64) {
	for _, f := range []float64{0, 0.5, 1} {
		y := float64(chartPadT) + plotH*(1-f)
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, chartPadL, chartW-10, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end" fill="#555">$%s</text>`,
			chartPadL-6, y+4, formatUSD(uint64(f*float64(peak))))
	}
}

func xLabels(b *strings.Builder, s SpendSeries, barW, plotH float64) {
	step := max(1, (len(s.Starts)+6)/7)
	for i := 0; i < len(s.Starts); i += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#555">%s</text>`,
			float64(chartPadL)+float64(i)*barW+barW/2, float64(chartPadT)+plotH+16, s.Starts[i].Format(bucketLayout(s.Bucket)))
	}
}

func legend(b *strings.Builder, models []string) {
	x := float64(chartPadL)
	y := float64(chartH - 6)
	for m, name := range models {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>`, x, y-9, chartColors[m%len(chartColors)])
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="#333">%s</text>`, x+14, y, template.HTMLEscapeString(name))
		x += 24 + 7*float64(len(name))
	}
}

func bucketLayout(grain string) string {
	if grain == "hour" {
		return "01-02 15:00"
	}
	return "2006-01-02"
}
