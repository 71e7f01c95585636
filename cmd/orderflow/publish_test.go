package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
)

// asPublished returns the bodies the publish command sends for the phases
// of a scenario, in order: the valid events numbered 1, 2, 3 … in
// producerID's sequence, a duplicate the bytes of the message it repeats
// when that went out in the same phase (else numbered anew), bad messages
// as generated; a lost event spends the number after its message's and is
// not sent, until a later phase publishes it with that number. It returns
// the bodies, the last number each phase used, and the numbers spent on
// lost events.
func asPublished(t *testing.T, producerID string, phases ...[]scenario.Message) ([]string, []int64, []scenario.Hole) {
	t.Helper()
	var (
		out   []string
		last  []int64
		holes []scenario.Hole
	)
	holeOf := map[scenario.Key]int64{}
	seq := int64(0)
	for _, msgs := range phases {
		numbered := map[string]string{}
		for _, m := range msgs {
			body := string(m.Msg.Body)
			if b, ok := numbered[body]; ok && m.Kind == scenario.KindDuplicate {
				out = append(out, b)
				continue
			}
			if m.Kind != scenario.KindBad {
				e, err := message.Decode(m.Msg.Body)
				if err != nil {
					t.Fatal(err)
				}
				if n, lost := holeOf[m.Event.Key()]; lost && m.Kind == scenario.KindEvent {
					e.Seq = n
				} else {
					seq++
					e.Seq = seq
				}
				e.ProducerID = producerID
				b, err := message.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				numbered[body] = string(b)
				body = string(b)
			}
			out = append(out, body)
			for _, l := range m.LostAfter {
				seq++
				holeOf[l.Key()] = seq
				holes = append(holes, scenario.Hole{ProducerID: producerID, Seq: seq, OrderID: l.OrderID, Version: l.Version})
			}
		}
		last = append(last, seq)
	}
	return out, last, holes
}

// TestPublishOnBroker publishes a scenario with the publish command to a
// fresh topic of the real broker, then its late phase with -late, reads it
// back and checks the contract's keys, tag and sharding key, the per-order
// publish order, the producer's sequence numbers (1 … n across both phases,
// a duplicate repeating its original's, holes only where an event was lost
// for good), and that the expected-state file reproduces exactly what was
// sent and records the phases published and the numbers spent on lost
// events.
func TestPublishOnBroker(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic := uniq.Name("scn-topic")
	testenv.CreateTopic(t, topic, 4)
	_, dsn := testenv.NewDatabase(t)
	prefix := uniq.Name("scn")
	out := filepath.Join(t.TempDir(), "expected.json")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"publish", "-database-url", dsn,
		"-orders", "30", "-seed", "9", "-prefix", prefix, "-topic", topic, "-rocketmq-namesrv", namesrv,
		"-dup-rate", "0.2", "-reorder", "0.5", "-conflicts", "3", "-bad", "6", "-gap-rate", "0.3",
		"-illegal", "4", "-late-conflicts", "2", "-late-rate", "0.3", "-out", out,
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "expected state written to "+out) || !strings.Contains(stdout.String(), "orderflow publish -late "+out) {
		t.Fatalf("output:\n%s", stdout.String())
	}
	exp, err := scenario.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	regen, err := scenario.Generate(exp.Options)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Topic != topic || exp.Counts.Messages != len(regen.Messages)+len(regen.Late) || len(regen.Late) == 0 || exp.Phases != 1 {
		t.Fatalf("expected file: topic %q, %d messages, phases %d; regenerated %d + %d late", exp.Topic, exp.Counts.Messages, exp.Phases,
			len(regen.Messages), len(regen.Late))
	}
	pid := exp.Options.ProducerID
	bodies, last, holes := asPublished(t, pid, regen.Messages, regen.Late)
	if want := fmt.Sprintf("(producer %s, seq 1-%d)", pid, last[0]); !strings.Contains(stdout.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, stdout.String())
	}
	if len(holes) == 0 || len(regen.Expected.Lost) == 0 || len(holes) == len(regen.Expected.Lost) {
		t.Fatalf("seed 9 loses %d events, %d of them for good; want some of both", len(holes), len(regen.Expected.Lost))
	}
	if !reflect.DeepEqual(exp.Holes, holes) {
		t.Fatalf("the file records the holes %+v, want %+v", exp.Holes, holes)
	}
	if want := fmt.Sprintf("lost %d events: their numbers spent, never sent", len(holes)); !strings.Contains(stdout.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, stdout.String())
	}

	// The late phase, from the file; the file then records it.
	stdout.Reset()
	if code := run(context.Background(), []string{"publish", "-database-url", dsn, "-late", out, "-topic", topic, "-rocketmq-namesrv", namesrv}, &stdout, &stderr); code != 0 {
		t.Fatalf("publish -late: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if want := fmt.Sprintf("(producer %s, seq %d-%d)", pid, last[0]+1, last[1]); !strings.Contains(stdout.String(), want) {
		t.Fatalf("output of publish -late lacks %q:\n%s", want, stdout.String())
	}
	if exp, err = scenario.ReadFile(out); err != nil || exp.Phases != 2 || !strings.Contains(stdout.String(), "expected state updated in "+out) {
		t.Fatalf("after publish -late: phases %d, %v\n%s", exp.Phases, err, stdout.String())
	}
	lostForGood := map[int64]bool{}
	for _, h := range exp.OpenHoles() {
		lostForGood[h.Seq] = true
	}
	if len(lostForGood) != len(exp.Lost) || !reflect.DeepEqual(exp.Holes, holes) {
		t.Fatalf("after publish -late: open holes %v for %d events lost, holes %+v", lostForGood, len(exp.Lost), exp.Holes)
	}
	if code := run(context.Background(), []string{"publish", "-late", out, "-topic", "elsewhere", "-rocketmq-namesrv", namesrv}, &stdout, &stderr); code != 2 {
		t.Fatalf("publish -late to another topic: exit %d, want 2", code)
	}
	all := append(append([]scenario.Message(nil), regen.Messages...), regen.Late...)

	var mu sync.Mutex
	var got []*primitive.MessageExt
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: uniq.Name("scn-group")},
		func(_ context.Context, m *primitive.MessageExt) error {
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read back %d of %d messages", n, len(all))
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()

	// Same multiset of bodies as the regenerated scenario, numbered.
	want := map[string]int{}
	for _, b := range bodies {
		want[b]++
	}
	for _, m := range got {
		want[string(m.Body)]--
	}
	for body, n := range want {
		if n != 0 {
			t.Fatalf("body count off by %d: %.120s", n, body)
		}
	}

	// Contract: keys and sharding key the order ID, tag the status; one
	// order's messages share a queue, in publish order.
	type rec struct {
		queue  int
		offset int64
		body   string
	}
	byOrder := map[string][]rec{}
	seqs := map[int64]int{}
	for _, m := range got {
		var e struct {
			OrderID    string `json:"order_id"`
			Status     string `json:"status"`
			Version    int64  `json:"version"`
			ProducerID string `json:"producer_id"`
			Seq        int64  `json:"seq"`
		}
		if strings.Contains(m.GetKeys(), "-bad-") {
			continue
		}
		if err := json.Unmarshal(m.Body, &e); err != nil {
			t.Fatalf("valid message does not decode: %v", err)
		}
		if e.ProducerID != pid {
			t.Fatalf("message of %s v%d: producer %q, want %q", e.OrderID, e.Version, e.ProducerID, pid)
		}
		seqs[e.Seq]++
		if m.GetKeys() != e.OrderID || m.GetTags() != e.Status || m.GetShardingKey() != e.OrderID {
			t.Fatalf("message of %s v%d: keys %q tag %q sharding %q", e.OrderID, e.Version, m.GetKeys(), m.GetTags(), m.GetShardingKey())
		}
		byOrder[e.OrderID] = append(byOrder[e.OrderID], rec{m.Queue.QueueId, m.QueueOffset, string(m.Body)})
	}
	for n := int64(1); n <= last[1]; n++ {
		if (seqs[n] == 0) != lostForGood[n] {
			t.Fatalf("seq %d (of %d): %d messages; lost for good: %v", n, last[1], seqs[n], lostForGood[n])
		}
	}
	if len(seqs) != int(last[1])-len(lostForGood) {
		t.Fatalf("%d distinct sequence numbers, want %d - %d", len(seqs), last[1], len(lostForGood))
	}
	wantOrder := map[string][]string{}
	for i, m := range all {
		if m.Kind != scenario.KindBad {
			wantOrder[m.Event.OrderID] = append(wantOrder[m.Event.OrderID], bodies[i])
		}
	}
	if len(byOrder) != len(exp.Orders) || len(got) != len(all) {
		t.Fatalf("read %d messages of %d orders, want %d of %d", len(got), len(byOrder), len(all), len(exp.Orders))
	}
	for id, rs := range byOrder {
		sort.Slice(rs, func(a, b int) bool { return rs[a].offset < rs[b].offset })
		for i, r := range rs {
			if r.queue != rs[0].queue {
				t.Fatalf("order %s spans queues %d and %d", id, rs[0].queue, r.queue)
			}
			if r.body != wantOrder[id][i] {
				t.Fatalf("order %s: message %d out of publish order", id, i)
			}
		}
	}
}

func TestPublishRejectsBadFlags(t *testing.T) {
	// An expected-state file of a run without a late phase.
	sc, err := scenario.Generate(scenario.Options{Orders: 3, Seed: 1, Prefix: "nolate"})
	if err != nil {
		t.Fatal(err)
	}
	noLate := filepath.Join(t.TempDir(), "expected.json")
	if err := sc.Expected.WriteFile(noLate); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-orders", "0"},
		{"-dup-rate", "2"},
		{"-prefix", "has space"},
		{"-illegal", "-1"},
		{"-late-rate", "1.5"},
		{"-nosuchflag"},
		{"extra"},
		{"-late", filepath.Join(t.TempDir(), "missing.json")},
		{"-late", noLate},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"publish"}, args...), &out, &errOut); code != 2 {
			t.Errorf("orderflow publish %v: exit %d, want 2\n%s", args, code, errOut.String())
		}
	}
}

// publish sends only to a name server on this machine unless
// -allow-remote says otherwise: refused before it connects to anything.
func TestPublishRefusesARemoteNameServer(t *testing.T) {
	dead, deadAddr := downDatabase(t)
	for _, namesrv := range []string{"192.0.2.1:9876", "rocketmq-namesrv:9876", "127.0.0.1:9876,192.0.2.1:9876",
		"http://127.0.0.1:9876", "127.0.0.2.nip.io:9876"} {
		code, out, errOut := runCmd("publish", "-rocketmq-namesrv", namesrv, "-database-url", dead, "-orders", "2")
		if code != 2 || !strings.Contains(errOut, "-allow-remote") || strings.Contains(out+errOut, deadAddr) {
			t.Errorf("publish to %s: exit %d, want 2 naming -allow-remote before any connection\n%s%s", namesrv, code, out, errOut)
		}
		code, out, errOut = runCmd("publish", "-late", filepath.Join(t.TempDir(), "none.json"), "-rocketmq-namesrv", namesrv)
		if code != 2 || !strings.Contains(errOut, "-allow-remote") {
			t.Errorf("publish -late to %s: exit %d, want 2 naming -allow-remote\n%s%s", namesrv, code, out, errOut)
		}
	}
	// With the flag it goes on, and fails on the database it cannot reach.
	code, out, errOut := runCmd("publish", "-allow-remote", "-rocketmq-namesrv", "192.0.2.1:9876", "-database-url", dead, "-orders", "2",
		"-out", filepath.Join(t.TempDir(), "expected.json"))
	if code != 1 || !strings.Contains(errOut, deadAddr) {
		t.Errorf("publish -allow-remote: exit %d, want 1 on the unreachable database\n%s%s", code, out, errOut)
	}
}

func TestLocalNameServer(t *testing.T) {
	for addr, local := range map[string]bool{
		"127.0.0.1:9876": true, "127.3.2.1:9876": true, "localhost:9876": true, "LOCALHOST:9876": true, "[::1]:9876": true,
		"127.0.0.1:9876, localhost:9877": true, "ns.localhost:9876": true,
		"10.0.0.5:9876": false, "[::]:9876": false, "0.0.0.0:9876": false, "rocketmq-namesrv:9876": false, "localhost.example.com:9876": false,
		"127.0.0.1:9876,10.0.0.5:9876": false, "http://localhost:9876": false, "": false,
	} {
		if err := checkLocalNameServer(addr); (err == nil) != local {
			t.Errorf("checkLocalNameServer(%q) = %v, want local %v", addr, err, local)
		}
	}
}
