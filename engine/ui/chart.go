package ui

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// The charts are drawn on the server as inline SVG: a few hundred points need
// no charting library, and the page stays one request with no build step.
const (
	chartW, chartH            = 560, 190
	padLeft, padRight         = 70, 10
	padTop, padBottom         = 10, 24
	plotW, plotH              = chartW - padLeft - padRight, chartH - padTop - padBottom
	maxSeries                 = 8 // colours in page.css: .s0 … .s7
	gridLines                 = 3
	barFill           float64 = 0.8
)

// series is one line (or one layer of stacked bars): a value per batch, NaN
// where the batch has none.
type series struct {
	Name   string
	Values []float64
}

// chart is one chart of the page.
type chart struct {
	ID, Title string
	// Batches are the x values.
	Batches []int64
	Series  []series
	// Stacked draws stacked bars instead of lines.
	Stacked bool
	// FromMin starts the y axis at the smallest value, not at 0 (the watermark).
	FromMin bool
	// Format writes a y value for the axis and the tooltips.
	Format func(float64) string
	// Empty is said instead of the chart when no batch has a value.
	Empty string
}

// legendItem is a series' name and colour class.
type legendItem struct{ Name, Class string }

func (c chart) Legend() []legendItem {
	var l []legendItem
	for i, s := range c.Series {
		l = append(l, legendItem{s.Name, fmt.Sprintf("s%d", i%maxSeries)})
	}
	return l
}

// HasData reports whether any batch has a value.
func (c chart) HasData() bool {
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				return true
			}
		}
	}
	return false
}

// SVG draws the chart.
func (c chart) SVG() template.HTML {
	lo, hi := c.bounds()
	n := len(c.Batches)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-chart="%s" data-batches="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		c.ID, n, chartW, chartH, template.HTMLEscapeString(c.Title))
	// Grid and y labels.
	for i := 0; i <= gridLines; i++ {
		v := lo + (hi-lo)*float64(i)/gridLines
		y := c.y(v, lo, hi)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padLeft, chartW-padRight, y, y)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, padLeft-6, y+4, template.HTMLEscapeString(c.Format(v)))
	}
	// X labels: the first and last batch.
	if n > 0 {
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">batch %d</text>`, padLeft, chartH-6, c.Batches[0])
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">batch %d</text>`, chartW-padRight, chartH-6, c.Batches[n-1])
	}
	if c.Stacked {
		c.bars(&b, lo, hi)
	} else {
		c.lines(&b, lo, hi)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built here from numbers and escaped names
}

func (c chart) lines(b *strings.Builder, lo, hi float64) {
	for i, s := range c.Series {
		fmt.Fprintf(b, `<g class="series s%d" data-series="%s">`, i%maxSeries, template.HTMLEscapeString(s.Name))
		var pts []string
		for j, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			x, y := c.x(j), c.y(v, lo, hi)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5"><title>batch %d: %s %s</title></circle>`,
				x, y, c.Batches[j], template.HTMLEscapeString(s.Name), template.HTMLEscapeString(c.Format(v)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline points="%s"/>`, strings.Join(pts, " "))
		}
		b.WriteString(`</g>`)
	}
}

func (c chart) bars(b *strings.Builder, lo, hi float64) {
	n := len(c.Batches)
	if n == 0 {
		return
	}
	w := float64(plotW) / float64(n) * barFill
	base := make([]float64, n)
	for i, s := range c.Series {
		fmt.Fprintf(b, `<g class="series s%d" data-series="%s">`, i%maxSeries, template.HTMLEscapeString(s.Name))
		for j, v := range s.Values {
			if math.IsNaN(v) || v <= 0 {
				continue
			}
			y0, y1 := c.y(base[j], lo, hi), c.y(base[j]+v, lo, hi)
			base[j] += v
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>batch %d: %s %s</title></rect>`,
				c.x(j)-w/2, y1, w, y0-y1, c.Batches[j], template.HTMLEscapeString(s.Name), template.HTMLEscapeString(c.Format(v)))
		}
		b.WriteString(`</g>`)
	}
}

// bounds returns the y axis' range.
func (c chart) bounds() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	n := len(c.Batches)
	sums := make([]float64, n)
	for _, s := range c.Series {
		for j, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
			if j < n {
				sums[j] += v
			}
		}
	}
	if c.Stacked {
		for _, v := range sums {
			hi = math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	if !c.FromMin {
		lo = math.Min(lo, 0)
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// x is the centre of batch j's slot.
func (c chart) x(j int) float64 {
	n := len(c.Batches)
	return padLeft + (float64(j)+0.5)*float64(plotW)/float64(n)
}

func (c chart) y(v, lo, hi float64) float64 {
	return padTop + float64(plotH)*(1-(v-lo)/(hi-lo))
}
