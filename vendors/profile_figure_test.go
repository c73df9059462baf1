package vendors

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

var updateFigure = flag.Bool("update-figure", false, "rewrite docs/img/vendor-windows.svg")

const figurePath = "../docs/img/vendor-windows.svg"

// series is one line of a panel: y(w) for w in seconds.
type series struct {
	label, color string
	dash         bool
	y            func(w float64) float64
}

// panel draws series over [0, xmax] seconds at (ox, oy), w × h pixels.
func panel(b *strings.Builder, ox, oy, w, h float64, title, ylabel string, xmax, ymax float64, ss []series) {
	fmt.Fprintf(b, `<text x="%g" y="%g" font-size="14" font-weight="bold">%s</text>`+"\n", ox, oy-12, title)
	fmt.Fprintf(b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#999"/>`+"\n", ox, oy, w, h)
	for i := 0; i <= 4; i++ {
		x := ox + w*float64(i)/4
		fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11" text-anchor="middle">%gs</text>`+"\n", x, oy+h+14, xmax*float64(i)/4)
		y := oy + h - h*float64(i)/4
		fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11" text-anchor="end">%g</text>`+"\n", ox-4, y+4, ymax*float64(i)/4)
		fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#eee"/>`+"\n", ox, y, ox+w, y)
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11" text-anchor="middle">window length</text>`+"\n", ox+w/2, oy+h+30)
	fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11" transform="rotate(-90 %g %g)" text-anchor="middle">%s</text>`+"\n", ox-44, oy+h/2, ox-44, oy+h/2, ylabel)
	for i, s := range ss {
		var pts []string
		const steps = 600
		for k := 0; k <= steps; k++ {
			x := xmax * float64(k) / steps
			y := math.Min(s.y(x), ymax)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", ox+w*x/xmax, oy+h-h*y/ymax))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		ly := oy + 16 + 16*float64(i)
		fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`+"\n", ox+10, ly-4, ox+30, ly-4, s.color, dash)
		fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11">%s</text>`+"\n", ox+36, ly, s.label)
	}
}

// line returns a bucket's most admitted in w seconds: C + R·w.
func line(d Dimension) func(float64) float64 {
	c := d.Config
	return func(w float64) float64 {
		return float64(c.Capacity) + float64(c.RefillAmount)*w/c.RefillPeriod.Seconds()
	}
}

// figure draws, from the profiles and the vendor rules, the most each
// admits in a window of length w: OpenAI 500 RPM (a vendor bucket of one
// second's worth, the profile, and a bucket holding a minute's worth) and
// Azure 30,000 TPM (a count reset each calendar minute, and the profile).
func figure(t *testing.T) string {
	o, err := OpenAIProfile(OpenAILimits{RPM: 500})
	if err != nil {
		t.Fatal(err)
	}
	a, err := AzureProfile(AzureLimits{TPM: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	rpm, _ := dimension(o, Requests)
	tpm, _ := dimension(a, Tokens)
	vendor := func(v Vendor, d Dimension) func(float64) float64 {
		return func(w float64) float64 {
			m, _ := vendorMax(t, v, d.Metric, d.Limit, int64(w*1000))
			f, _ := m.Float64()
			return f
		}
	}
	var b strings.Builder
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="960" height="340" font-family="sans-serif">` + "\n")
	b.WriteString(`<rect width="960" height="340" fill="white"/>` + "\n")
	panel(&b, 70, 40, 380, 250, "OpenAI 500 RPM: most requests admitted in any window", "requests", 60, 1000, []series{
		{"a bucket of 500 (a minute's worth): 500 + 500·w/60s", "#d62728", true, func(w float64) float64 { return 500 + 500*w/60 }},
		{"vendor (our reading): 8.33 + 500·w/60s", "#1f77b4", false, vendor(OpenAI, rpm)},
		{fmt.Sprintf("profile: %d + 500·w/%.3fs", rpm.Config.Capacity, rpm.Config.RefillPeriod.Seconds()), "#2ca02c", true, line(rpm)},
	})
	panel(&b, 560, 40, 380, 250, "Azure 30,000 TPM: most tokens in windows from a minute's start", "tokens", 180, 100_000, []series{
		{"vendor: 30000 per calendar minute", "#1f77b4", false, vendor(Azure, tpm)},
		{fmt.Sprintf("profile: %d + %d·w/60s (C + R ≤ N)", tpm.Config.Capacity, tpm.Config.RefillAmount), "#2ca02c", true, line(tpm)},
		{"a bucket of 30000 (a minute's worth)", "#d62728", true, func(w float64) float64 { return 30_000 + 30_000*w/60 }},
	})
	b.WriteString("</svg>\n")
	return b.String()
}

// TestFigure checks that docs/img/vendor-windows.svg is what the profiles
// and vendor rules draw today (go test -run TestFigure -update-figure
// rewrites it).
func TestFigure(t *testing.T) {
	got := figure(t)
	if *updateFigure {
		if err := os.WriteFile(figurePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(figurePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s is stale: rerun go test ./vendors -run TestFigure -update-figure", figurePath)
	}
}
