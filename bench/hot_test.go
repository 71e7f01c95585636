package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/scenario"
)

func TestHotScenario(t *testing.T) {
	sc, err := hotScenario("hot-test", 2000, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	exp := sc.Expected
	if len(sc.Messages) != 2000 || len(exp.Keys) != 2000 || exp.Counts.Events != 2000 || exp.Counts.Messages != 2000 {
		t.Fatalf("%d messages, %d keys, counts %+v", len(sc.Messages), len(exp.Keys), exp.Counts)
	}
	if len(exp.Orders) != 1 {
		t.Fatalf("%d expected orders", len(exp.Orders))
	}
	o := exp.Orders[0]
	if o.OrderID != scenario.OrderID("hot-test", 0) || o.Status != scenario.Completed || o.Version != 2000 || o.UserID != 7 {
		t.Errorf("expected order %+v, want COMPLETED at version 2000", o)
	}
	// The paid events carry the amount of the last update, so the purchase
	// points do not depend on which of them is applied first.
	if k := exp.Keys[1995]; k.Status != scenario.Created || k.AmountCents != o.AmountCents {
		t.Errorf("last update %+v, want CREATED with the final amount %d", k, o.AmountCents)
	}
	if k := exp.Keys[1999]; k.Outcome != scenario.OutcomeApplied || exp.Keys[1998].Outcome != "" {
		t.Errorf("outcomes %q, %q: only the highest version is stated (applied)", exp.Keys[1998].Outcome, k.Outcome)
	}
	for i, m := range sc.Messages {
		if m.Kind != scenario.KindEvent || m.Event.Version != int64(i+1) || m.Event.Content() != exp.Keys[i].Content {
			t.Fatalf("message %d: %+v", i, m.Event)
		}
		var e fsm.Event
		if err := json.Unmarshal(m.Msg.Body, &e); err != nil || e.Validate() != nil || e.Key() != (fsm.Key{OrderID: o.OrderID, Version: int64(i + 1)}) {
			t.Fatalf("message %d: body %s is not a valid event of the contract (%v)", i, m.Msg.Body, err)
		}
		if m.Msg.ShardingKey != o.OrderID || m.Msg.Keys != o.OrderID {
			t.Fatalf("message %d: sharding key %q, keys %q", i, m.Msg.ShardingKey, m.Msg.Keys)
		}
	}
	if _, err := hotScenario("hot-test", 4, time.Now()); err == nil {
		t.Error("a hot order of 4 events was built")
	}
}

func TestHotResultString(t *testing.T) {
	r := hotResult{Runs: 4, Statuses: map[string]int{"ContinuedAsNew": 3, "Running": 1}, MaxHistory: 1100,
		MaxSignals: 520, MaxEvents: 700, MaxHandled: 500, TaskFailures: map[string]int{"ForceCloseCommand": 2, "UnhandledCommand": 1}}
	want := "4 run(s) (ContinuedAsNew 3, Running 1), longest history 1100 events, at most 520 signals (700 order events) received and 500 events handled in one run, " +
		"3 failed workflow tasks (ForceCloseCommand 2, UnhandledCommand 1)"
	if got := r.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	r.TaskFailures = nil
	if got := r.String(); !strings.HasSuffix(got, ", 0 failed workflow tasks") {
		t.Errorf("String() without failures = %s", got)
	}
}
