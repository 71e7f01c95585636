package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/bridge"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// TestGapsFindWhatAPublishedRunLost publishes a scenario with lost events
// through `orderflow publish`, has a bridge record the sequence numbers it
// receives (delivery succeeds without Temporal: this test is about the
// numbers), and checks that `orderflow gaps` reports exactly the (producer,
// seq) pairs of the events the generator dropped; after the late phase,
// only those never published.
func TestGapsFindWhatAPublishedRunLost(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	st := store.New(gdb)
	topic, group := uniq.Name("lost"), uniq.Name("lost-g")
	testenv.CreateTopic(t, topic, 4)
	testenv.CreateTopic(t, "%RETRY%"+group, 1)
	startRecordingBridge(t, namesrv, topic, group, st)

	ctx := context.Background()
	orderflow := func(args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(ctx, args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "expected.json")
	code, text := orderflow("publish", "-topic", topic, "-rocketmq-namesrv", namesrv,
		"-orders", "40", "-seed", "21", "-prefix", uniq.Name("lost"), "-gap-rate", "0.4", "-late-rate", "0.5",
		"-dup-rate", "0.1", "-conflicts", "1", "-bad", "2", "-illegal", "2", "-out", out)
	if code != 0 {
		t.Fatalf("publish: exit %d\n%s", code, text)
	}
	exp, err := scenario.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	pid := exp.Options.ProducerID

	// What the generator dropped: the events never published, and those
	// only the late phase publishes; and the numbers they would have had.
	regen, err := scenario.Generate(exp.Options)
	if err != nil {
		t.Fatal(err)
	}
	dropped := map[scenario.Key]string{}
	for _, k := range regen.Expected.Lost {
		dropped[k.Key()] = "never"
	}
	for _, k := range regen.Expected.Keys {
		if k.Phase == 2 && k.Outcome == scenario.OutcomeStale {
			dropped[k.Key()] = "late"
		}
	}
	_, last, holes := asPublished(t, pid, regen.Messages, regen.Late)
	var all, never []int64
	for _, h := range holes {
		switch dropped[h.Key()] {
		case "never":
			never = append(never, h.Seq)
		case "late":
		default:
			t.Fatalf("hole %+v is no event the generator dropped", h)
		}
		all = append(all, h.Seq)
	}
	if len(holes) != len(dropped) || len(never) == 0 || len(never) == len(all) || all[len(all)-1] >= last[0] {
		t.Fatalf("seed 21 drops %d events (%d for good), holes %v up to %d; want some of each, below the phase's last number",
			len(dropped), len(never), all, last[0])
	}

	// The first phase: every dropped event is a hole.
	waitHoles(t, st, pid, last[0], all)
	code, text = orderflow("gaps", "-gap-window", "0s")
	if want := suspectedLine(pid, all); code != 1 || !strings.Contains(text, want+"\n") {
		t.Fatalf("gaps after the first phase: exit %d, want 1 and %q\n%s", code, want, text)
	}
	if code, text = orderflow("gaps", "-expected", out, "-gap-window", "0s"); code != 0 ||
		!strings.Contains(text, fmt.Sprintf("the suspected losses are the %d event(s) it lost", len(all))) {
		t.Fatalf("gaps -expected after the first phase: exit %d\n%s", code, text)
	}
	// The holes are younger than an hour: nothing suspected, which is not
	// what the run lost.
	if code, text = orderflow("gaps", "-expected", out, "-gap-window", "1h"); code != 1 ||
		!strings.Contains(text, fmt.Sprintf("0 suspected lost messages from producer %s, the run lost %d", pid, len(all))) {
		t.Fatalf("gaps -expected -gap-window 1h: exit %d\n%s", code, text)
	}
	firstPhase := filepath.Join(dir, "first-phase.json")
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(firstPhase, b, 0o600); err != nil {
		t.Fatal(err)
	}

	// The late phase: the lost events it publishes close their holes.
	if code, text = orderflow("publish", "-late", out, "-topic", topic, "-rocketmq-namesrv", namesrv); code != 0 {
		t.Fatalf("publish -late: exit %d\n%s", code, text)
	}
	waitHoles(t, st, pid, last[1], never)
	code, text = orderflow("gaps", "-producer", pid, "-gap-window", "0s")
	if want := suspectedLine(pid, never); code != 1 || !strings.Contains(text, want+"\n") {
		t.Fatalf("gaps after the late phase: exit %d, want 1 and %q\n%s", code, want, text)
	}
	if code, text = orderflow("gaps", "-expected", out, "-gap-window", "0s", "-wait", "10s"); code != 0 ||
		!strings.Contains(text, fmt.Sprintf("the suspected losses are the %d event(s) it lost", len(never))) {
		t.Fatalf("gaps -expected after the late phase: exit %d\n%s", code, text)
	}
	t.Logf("seq %v lost, %v of them for good; orderflow gaps -expected after the late phase:\n%s", all, never, text)
	// The first phase's file expects the late holes too.
	if code, text = orderflow("gaps", "-expected", firstPhase, "-gap-window", "0s"); code != 1 || !strings.Contains(text, "the run lost") {
		t.Fatalf("gaps -expected with the first phase's file after the late phase: exit %d\n%s", code, text)
	}
}

// startRecordingBridge consumes topic with the bridge's handler, which
// records every message's sequence number in st; valid events are
// "delivered" at once, invalid ones parked.
func startRecordingBridge(t *testing.T, namesrv, topic, group string, st *store.Store) {
	t.Helper()
	m, err := bridge.NewMetrics(prometheus.NewRegistry(), bridge.NewConsumerStats(func() bridge.ConsumerSource { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(context.Context, fsm.Event, wire.Envelope) error { return nil }
	park := func(ctx context.Context, dl wire.DeadLetter) error {
		_, err := st.ParkDeadLetter(ctx, dl)
		return err
	}
	h := bridge.NewHandler(slog.New(slog.NewTextHandler(io.Discard, nil)), deliver, park, m, bridge.DefaultRetry).WithRecorder(st.RecordSeq)
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group}, h.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
}

// waitHoles waits until the numbers of producer pid recorded in st reach
// highest, with exactly the holes want.
func waitHoles(t *testing.T, st *store.Store, pid string, highest int64, want []int64) {
	t.Helper()
	want = append([]int64(nil), want...)
	sort.Slice(want, func(a, b int) bool { return want[a] < want[b] })
	deadline := time.Now().Add(90 * time.Second)
	for {
		ps, err := st.SequenceGaps(context.Background(), pid)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		if len(ps) == 1 {
			for _, g := range ps[0].Gaps {
				for n := g.From; n <= g.To; n++ {
					got = append(got, n)
				}
			}
			if ps[0].Highest == highest && reflect.DeepEqual(got, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s: %+v (holes %v); want highest %d and holes %v", ps, got, highest, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// suspectedLine is the line gaps prints for producer pid missing seqs:
// consecutive numbers as ranges.
func suspectedLine(pid string, seqs []int64) string {
	seqs = append([]int64(nil), seqs...)
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(seqs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		}
		i = j + 1
	}
	return fmt.Sprintf("suspected lost: %d messages from producer %s (seq %s)", len(seqs), pid, strings.Join(parts, ", "))
}
