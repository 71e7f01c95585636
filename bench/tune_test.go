package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseTune(t *testing.T) {
	_, _, o, err := parse(nil)
	if err != nil || o.tune.enabled() || o.tune.Orders != 400 {
		t.Fatalf("without -tune: enabled %v, orders %d (%v); want off, 400", o.tune.enabled(), o.tune.Orders, err)
	}
	_, _, o, err = parse([]string{"-tune", "all"})
	if err != nil || !o.tune.enabled() || len(o.tune.Knobs) != 8 {
		t.Fatalf("-tune all: %d knobs (%v), want 8", len(o.tune.Knobs), err)
	}
	var names []string
	for _, k := range o.tune.Knobs {
		names = append(names, k.Name)
	}
	want := []string{"workflow-pollers", "max-concurrent-workflow-tasks", "sticky-cache-size", "concurrency", "batch-size", "dev-sqlite-synchronous", "dev-task-queue-partitions", "db-max-open-conns"}
	if !slices.Equal(names, want) {
		t.Errorf("-tune all runs %v, want %v", names, want)
	}
	// In the order given, each once.
	_, _, o, err = parse([]string{"-tune", "db-max-open-conns, workflow-pollers,db-max-open-conns", "-tune-orders", "60"})
	if err != nil || len(o.tune.Knobs) != 2 || o.tune.Knobs[0].Name != "db-max-open-conns" ||
		o.tune.Knobs[1].Name != "workflow-pollers" || o.tune.Orders != 60 {
		t.Errorf("-tune db-max-open-conns,workflow-pollers,db-max-open-conns: %+v (%v)", o.tune, err)
	}
	for _, args := range [][]string{
		{"-tune", "pollers"},
		{"-tune", "workflow-pollers,"},
		{"-tune", "all", "-tune-orders", "0"},
	} {
		if _, _, _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted bad input", args)
		}
	}
	if _, _, _, err := parse([]string{"-tune", "nope"}); err == nil || !strings.Contains(err.Error(), "sticky-cache-size") {
		t.Errorf("an unknown knob's error does not list the knobs: %v", err)
	}
}

func TestTuneSchedule(t *testing.T) {
	for n, want := range map[int][]int{1: {0, 1, 1, 0}, 2: {0, 1, 2, 2, 1, 0}, 3: {0, 1, 2, 3, 3, 2, 1, 0}} {
		got := tuneSchedule(n)
		if !slices.Equal(got, want) {
			t.Errorf("tuneSchedule(%d) = %v, want %v", n, got, want)
		}
		// Every setting runs twice, at places whose mean is the middle of
		// the run: a linear drift weighs on each alike.
		places := map[int][]int{}
		for i, s := range got {
			places[s] = append(places[s], i+1)
		}
		for s, p := range places {
			if len(p) != 2 || p[0]+p[1] != len(got)+1 {
				t.Errorf("tuneSchedule(%d): setting %d at places %v", n, s, p)
			}
		}
	}
}

// drains builds the drains of a knob whose settings have the given true
// rates, run in schedule order while the machine drifts by drift events/s
// per drain.
func drainsOf(rates []float64, drift float64) []tuneDrain {
	var out []tuneDrain
	for i, s := range tuneSchedule(len(rates) - 1) {
		out = append(out, tuneDrain{Setting: s, Result: cellResult{Rate: rates[s] + drift*float64(i+1),
			Messages: 100, Config: cellConfig{Workers: 1}}})
	}
	return out
}

func TestSummarizeCancelsALinearDrift(t *testing.T) {
	// A 100 events/s, B1 120, B2 80, the machine speeding up by 10 events/s
	// per drain: drains 1..6 are A 110, B1 140, B2 110, B2 120, B1 170, A 160.
	got := summarize([]string{"4", "16", "2"}, drainsOf([]float64{100, 120, 80}, 10))
	if len(got) != 3 {
		t.Fatalf("%d settings, want 3", len(got))
	}
	for i, w := range []struct {
		label  string
		drains []int
		rates  []float64
		mean   float64
	}{
		{"4", []int{1, 6}, []float64{110, 160}, 135},
		{"16", []int{2, 5}, []float64{140, 170}, 155},
		{"2", []int{3, 4}, []float64{110, 120}, 115},
	} {
		s := got[i]
		if s.Label != w.label || !slices.Equal(s.Drains, w.drains) || !slices.Equal(s.Rates, w.rates) || s.Mean != w.mean {
			t.Errorf("setting %d: %+v, want label %s drains %v rates %v mean %v", i, s, w.label, w.drains, w.rates, w.mean)
		}
	}
	// The drift adds the same 35 events/s to every mean: B - A is the
	// settings' own difference.
	if d := got[1].Mean - got[0].Mean; d != 20 {
		t.Errorf("B1 - A = %v, want 20", d)
	}
	if d := got[2].Mean - got[0].Mean; d != -20 {
		t.Errorf("B2 - A = %v, want -20", d)
	}
	if got[0].Ratio != 1 || got[1].Ratio != 155.0/135 || got[2].Ratio != 115.0/135 {
		t.Errorf("ratios %v %v %v", got[0].Ratio, got[1].Ratio, got[2].Ratio)
	}
	if got[0].Spread != 50.0/135 {
		t.Errorf("A's spread %v, want %v", got[0].Spread, 50.0/135)
	}
}

func TestSettingsOfLeavesOutA(t *testing.T) {
	if got := settingsOf("16", []string{"16", "2", "2"}); !slices.Equal(got, []string{"16", "2"}) {
		t.Errorf("settingsOf(16, [16 2 2]) = %v, want [16 2]", got)
	}
	if got := settingsOf("4", []string{"16", "2"}); !slices.Equal(got, []string{"4", "16", "2"}) {
		t.Errorf("settingsOf(4, [16 2]) = %v", got)
	}
}

func TestWorkerFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "20"},
		{[]string{"-db-max-open-conns", "10"}, "10"},
		{[]string{"-db-max-open-conns", "10", "--db-max-open-conns=12"}, "12"},
		{[]string{"-db-max-open-conns=7", "-workflow-pollers", "8"}, "7"},
		{[]string{"-workflow-pollers", "db-max-open-conns"}, "20"},
		{[]string{"-db-max-open-conns"}, "20"},
	} {
		if got := workerFlag(c.args, "db-max-open-conns", "20"); got != c.want {
			t.Errorf("workerFlag(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestKnobsApplyToTheDrainOnly applies each knob's variants to copies of
// one benchmark: each copy's worker flags or cell carry the variant, and
// neither the benchmark nor another copy changes.
func TestKnobsApplyToTheDrainOnly(t *testing.T) {
	_, tu, o, err := parse([]string{"-tune", "all", "-tune-orders", "60", "-worker-args", "-log-level warn"})
	if err != nil {
		t.Fatal(err)
	}
	base := make([]string, 0, 16) // room to append: a copy must not write into it
	base = append(base, strings.Fields(o.workerArgs)...)
	b := &bench{tuning: tu, workerArgs: base}
	// A and B of each knob with these flags, and what a drain's processes
	// get for B: a worker flag, or the bridge's concurrency or batch size.
	want := map[string]struct {
		a, b []string
	}{
		"workflow-pollers":              {[]string{"4"}, []string{"16", "2"}},
		"max-concurrent-workflow-tasks": {[]string{"100"}, []string{"20", "400"}},
		"sticky-cache-size":             {[]string{"0"}, []string{"15"}}, // a quarter of 60 orders
		"concurrency":                   {[]string{"32"}, []string{"64"}},
		"batch-size":                    {[]string{"16"}, []string{"32"}},
		"db-max-open-conns":             {[]string{"20"}, []string{"5", "50"}},
	}
	// An engine knob's settings are dev servers of their own, whose
	// scripts/stack.sh variables carry the setting.
	wantEngine := map[string][2]string{
		"dev-sqlite-synchronous":    {"ORDERFLOW_TEMPORAL_SQLITE_PRAGMAS=journal_mode=wal synchronous=NORMAL", "ORDERFLOW_TEMPORAL_SQLITE_PRAGMAS=journal_mode=wal synchronous=OFF"},
		"dev-task-queue-partitions": {"matching.numTaskqueueReadPartitions=4", "matching.numTaskqueueWritePartitions=1"},
	}
	for _, k := range o.tune.Knobs {
		labels := settingsOf(k.current(b, o), k.variants(o))
		if k.engine != nil {
			w, ok := wantEngine[k.Name]
			if !ok || len(labels) != 2 {
				t.Errorf("%s: settings %v", k.Name, labels)
				continue
			}
			for i, l := range labels {
				spec := k.engine(l)
				env := strings.Join(spec.Env(o), " ")
				if spec.Profile != "dev" || !strings.Contains(env, w[i]) {
					t.Errorf("%s = %s: engine %s, profile %q, env %q; want the dev profile with %q", k.Name, l, spec.Name, spec.Profile, env, w[i])
				}
			}
			if k.engine(labels[0]).Name == k.engine(labels[1]).Name {
				t.Errorf("%s: A and B share the engine name %s (and so its data folder)", k.Name, k.engine(labels[0]).Name)
			}
			continue
		}
		w := want[k.Name]
		if labels[0] != w.a[0] || !slices.Equal(labels[1:], w.b) {
			t.Errorf("%s: settings %v, want A %v B %v", k.Name, labels, w.a, w.b)
			continue
		}
		var copies []*bench
		var cells []*cellConfig
		for _, v := range labels[1:] {
			bc := *b
			cc := &cellConfig{Concurrency: o.concurrency, BatchSize: o.batch}
			k.apply(&bc, cc, v)
			copies, cells = append(copies, &bc), append(cells, cc)
		}
		for i, v := range labels[1:] {
			args := append(copies[i].tuning.workerFlags(), copies[i].workerArgs...)
			var got string
			switch k.Side {
			case "worker":
				got = workerFlag(args, k.Name, "")
			case "bridge":
				got = map[string]string{"concurrency": strconv.Itoa(cells[i].Concurrency), "batch-size": strconv.Itoa(cells[i].BatchSize)}[k.Name]
			}
			if got != v {
				t.Errorf("%s = %s: the drain gets %q", k.Name, v, got)
			}
		}
		if b.tuning != tu || !slices.Equal(b.workerArgs, []string{"-log-level", "warn"}) {
			t.Errorf("%s changed the benchmark's own settings: %+v %q", k.Name, b.tuning, b.workerArgs)
		}
	}
}

func TestWriteTuneTable(t *testing.T) {
	drains := drainsOf([]float64{100, 120}, 0)
	for i := range drains {
		drains[i].Result.Metrics = map[string]float64{keySchedule: 13.5, keyExec + "_count": 25, keyRespond: 0.058,
			keyMisses: float64(40 * drains[i].Setting)}
		drains[i].Result.CPU = &cpuShare{Cores: map[string]float64{"temporal": 0.9 + 0.01*float64(i), "worker": 0.1}, Idle: 0.25}
	}
	k := tuneKnobResult{Knob: "workflow-pollers", Side: "worker", Drains: drains, Settings: summarize([]string{"4", "16"}, drains)}
	var buf bytes.Buffer
	writeTuneTable(&buf, []tuneKnobResult{k})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a head, a rule and 2 rows:\n%s", len(lines), buf.String())
	}
	for _, w := range []string{
		"| workflow-pollers | A 4 | 100.0 (#1), 100.0 (#4) | 100.0 | 1.00 | 0% | – / – | 13.50 s / 13.50 s | 58.0 ms / 58.0 ms | 0.25 / 0.25 | 0.90 / 0.93 | 0.25 / 0.25 | 0 / 0 |",
		"|  | B 16 | 120.0 (#2), 120.0 (#3) | 120.0 | 1.20 | 0% | – / – | 13.50 s / 13.50 s | 58.0 ms / 58.0 ms | 0.25 / 0.25 | 0.91 / 0.92 | 0.25 / 0.25 | 40 / 40 |",
	} {
		if !slices.Contains(lines, w) {
			t.Errorf("no row\n%s\nin\n%s", w, buf.String())
		}
	}
	if a := defaultRates([]tuneKnobResult{k, k}); !slices.Equal(a, []float64{100, 100, 100, 100}) {
		t.Errorf("default rates %v", a)
	}
}

// TestTuneRun runs the tuning mode for real on the local stack: the sticky
// cache knob, four drains of a 48-order scenario. The variant keeps a
// quarter of the orders' workflow executions in the worker's cache, the
// default (10,000) all of them.
func TestTuneRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the worker and the bridge and drains four backlogs on the local stack (about a minute)")
	}
	const orders = 48
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(ctx, []string{"-tune", "sticky-cache-size", "-tune-orders", strconv.Itoa(orders), "-log-dir", dir}, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "results.json"))
	if len(files) != 1 {
		t.Fatalf("results files %v, want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var res tuneResults
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Knobs) != 1 || len(res.Knobs[0].Drains) != 4 {
		t.Fatalf("results: %+v, want one knob of 4 drains", res)
	}
	for i, d := range res.Knobs[0].Drains {
		r := d.Result
		if wantB := i == 1 || i == 2; (d.Setting == 1) != wantB {
			t.Errorf("drain %d ran setting %d: not in the order A B B A", i+1, d.Setting)
		}
		if !r.Verified || r.Rate <= 0 || r.Config.Orders != orders {
			t.Errorf("drain %d: verified %v, rate %v, %d orders", i+1, r.Verified, r.Rate, r.Config.Orders)
		}
		if _, ok := r.Metrics[keySchedule]; !ok {
			t.Errorf("drain %d: no workflow task schedule-to-start mean in %v", i+1, r.Metrics)
		}
		// Temporal serves every drain. (A group's figure is a lower bound:
		// a process that exits takes its CPU time with it, so the worker's
		// may read 0 while another worker process on the machine ends.)
		if r.CPU == nil || r.CPU.Cores["temporal"] <= 0 {
			t.Errorf("drain %d: CPU use %+v, want some for Temporal", i+1, r.CPU)
		}
		// Every order's workflow is open (its grace period has not ended).
		size, ok := r.Metrics[keySticky]
		if !ok || d.Setting == 0 && size != orders || d.Setting == 1 && (size < 1 || size > orders/4) {
			t.Errorf("drain %d (setting %d): %v workflow executions in the sticky cache", i+1, d.Setting, size)
		}
	}
	if !strings.Contains(out.String(), "| sticky-cache-size | A 0 |") || !strings.Contains(out.String(), "|  | B 12 |") {
		t.Errorf("the table lacks the knob's rows")
	}
}
