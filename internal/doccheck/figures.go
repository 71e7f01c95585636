package doccheck

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// BenchRun is the part of a bench/results/*.json file the figures read.
type BenchRun struct {
	Commit  string        `json:"commit"`
	Engines []BenchEngine `json:"engines"`
}

// BenchEngine is one engine's cells in a run.
type BenchEngine struct {
	Name     string    `json:"name"`
	E2E      BenchCell `json:"e2e"`
	Floor    BenchCell `json:"floor"`
	HotOrder BenchCell `json:"hot_order"`
	Sweep    struct {
		Capacity float64   `json:"capacity"`
		At09     BenchCell `json:"at_0_9_capacity"`
	} `json:"sweep"`
	FloorSweep struct {
		Capacity float64 `json:"capacity"`
	} `json:"floor_sweep"`
	DirectSweep struct {
		Capacity float64 `json:"capacity"`
	} `json:"direct_floor_sweep"`
	// Interleaved is the three stages at one rate: each stage's CPU ms
	// per distinct event by process group ("all": every process).
	Interleaved struct {
		Rate  float64                       `json:"rate"`
		CPU   map[string]map[string]float64 `json:"cpu_ms_per_event"`
		Cells []struct {
			Stage string    `json:"stage"`
			Cell  BenchCell `json:"cell"`
		} `json:"cells"`
	} `json:"interleaved"`
	// DupRatio is 50% duplicates over none (the first engine only), and
	// DupCPURatio the same in every process's CPU per distinct event.
	DupRatio    float64 `json:"ratio_dup_none"`
	DupCPURatio float64 `json:"ratio_dup_none_cpu"`
}

// BenchCell is one measured cell: its rate, its cost per event and the
// cores each group of processes used.
type BenchCell struct {
	Rate float64 `json:"Rate"`
	// P50 and P99 are latencies in nanoseconds.
	P50  float64        `json:"P50"`
	P99  float64        `json:"P99"`
	Cost map[string]any `json:"Cost"`
	CPU  *struct {
		Cores map[string]float64 `json:"cores"`
	} `json:"CPU"`
}

// ParseBenchRun reads a result file.
func ParseBenchRun(b []byte) (BenchRun, error) {
	var r BenchRun
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("read a bench result: %w", err)
	}
	return r, nil
}

var recordCommits = regexp.MustCompile(`(?m)^\| commits \| ([^|(]*)`)

// RunsOfRecord returns the result files of the runs of record
// BENCHMARKS.md names (its "commits" row), from the result files' names
// (bench/results/<start>-<commit>.json; a dirty build's file is none).
func RunsOfRecord(benchmarks string, files []string) ([]string, error) {
	m := recordCommits.FindStringSubmatch(benchmarks)
	if m == nil {
		return nil, fmt.Errorf("BENCHMARKS.md has no \"| commits |\" row")
	}
	var out []string
	for _, c := range regexp.MustCompile(`\b[0-9a-f]{7,40}\b`).FindAllString(m[1], -1) {
		n := len(out)
		for _, f := range files {
			if strings.HasSuffix(path.Base(f), "-"+c+".json") {
				out = append(out, f)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("BENCHMARKS.md names the run of record %s, whose result file is not in bench/results", c)
		}
	}
	return out, nil
}

// Figure is a figure a page cites from result files: where it is (a
// pattern whose groups are the printed figures), which files, and how
// each group is computed from them.
type Figure struct {
	Name    string
	Page    string
	Pattern *regexp.Regexp
	Files   []string
	Groups  []Computed
}

// Computed is one printed figure: the values each engine of each file
// gives, and how they are printed.
type Computed struct {
	Values func(BenchEngine) []float64
	Format func([]float64) string
}

// Engine selects one engine's values.
func Engine(name string, v func(BenchEngine) []float64) func(BenchEngine) []float64 {
	return func(e BenchEngine) []float64 {
		if e.Name != name {
			return nil
		}
		return v(e)
	}
}

// Range prints "min–max" with the decimals given.
func Range(decimals int) func([]float64) string {
	return func(v []float64) string {
		return Number(slices.Min(v), decimals) + "–" + Number(slices.Max(v), decimals)
	}
}

// Span prints "min–max", or one figure when they are the same.
func Span(decimals int) func([]float64) string {
	return func(v []float64) string {
		lo, hi := Number(slices.Min(v), decimals), Number(slices.Max(v), decimals)
		if lo == hi {
			return lo
		}
		return lo + "–" + hi
	}
}

// MedianRange prints "median (min–max)".
func MedianRange(decimals int) func([]float64) string {
	return func(v []float64) string {
		return Number(Median(v), decimals) + " (" + Range(decimals)(v) + ")"
	}
}

// ScaledMedian prints the median times factor, rounded to a multiple of
// step, as a whole number.
func ScaledMedian(factor, step float64) func([]float64) string {
	return func(v []float64) string {
		return Number(math.Round(Median(v)*factor/step)*step, 0)
	}
}

// Median is the middle value (the mean of the two middle ones).
func Median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Number prints x with the decimals given, thousands separated by commas.
func Number(x float64, decimals int) string {
	s := strconv.FormatFloat(x, 'f', decimals, 64)
	whole, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(whole, "-")
	whole = strings.TrimPrefix(whole, "-")
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	if neg {
		whole = "-" + whole
	}
	if frac != "" {
		return whole + "." + frac
	}
	return whole
}

// CheckFigure finds the figure in its page and compares each printed
// value with the one computed from its files (runs: every result file
// read, by path).
func CheckFigure(f Figure, p Page, runs map[string]BenchRun) []Finding {
	body := strings.Join(strings.Fields(p.Body), " ")
	m := f.Pattern.FindStringSubmatchIndex(body)
	if m == nil {
		return []Finding{{Page: p.Name, Msg: fmt.Sprintf("figure %q: its sentence is not on the page (pattern %s)", f.Name, f.Pattern)}}
	}
	if len(f.Files) == 0 {
		return []Finding{{Page: p.Name, Msg: fmt.Sprintf("figure %q: no result file", f.Name)}}
	}
	var out []Finding
	for i, g := range f.Groups {
		var values []float64
		for _, file := range f.Files {
			r, ok := runs[file]
			if !ok {
				return []Finding{{Page: p.Name, Msg: fmt.Sprintf("figure %q: no result file %s", f.Name, file)}}
			}
			for _, e := range r.Engines {
				values = append(values, g.Values(e)...)
			}
		}
		said := body[m[2+2*i]:m[3+2*i]]
		if len(values) == 0 {
			out = append(out, Finding{Page: p.Name, Msg: fmt.Sprintf("figure %q: %s is in no result file it cites", f.Name, said)})
			continue
		}
		if want := g.Format(values); said != want {
			out = append(out, Finding{Page: p.Name, Line: lineOf(p.Body, said), Msg: fmt.Sprintf("figure %q: the page says %s, its result files %s", f.Name, said, want)})
		}
	}
	return out
}

// lineOf is the line of the first occurrence of s in body (0 when it
// spans lines).
func lineOf(body, s string) int {
	if i := strings.Index(body, s); i >= 0 {
		return strings.Count(body[:i], "\n") + 1
	}
	return 0
}
