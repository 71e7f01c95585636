package workflows

import (
	"strings"
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
)

func TestDecisionSummary(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(v int64, s fsm.Status) fsm.Event {
		return fsm.Event{EventID: "e", OrderID: "S-1", UserID: 4, Status: s, Version: v, AmountCents: 94321, OccurredAt: at}
	}
	created := fsm.Decide(nil, e(1, fsm.Created)).Next
	paid := fsm.Decide(&created, e(3, fsm.Paid))
	cancelled := fsm.Decide(&paid.Next, e(4, fsm.Cancelled))
	for _, c := range []struct {
		e    fsm.Event
		d    fsm.Decision
		want string
	}{
		{e(1, fsm.Created), fsm.Decide(nil, e(1, fsm.Created)), "v1 CREATED → applied"},
		{e(3, fsm.Paid), paid, "v3 PAID → applied, over a gap, +943 points"},
		{e(4, fsm.Cancelled), cancelled, "v4 CANCELLED → applied, -943 points"},
		{e(2, fsm.Created), fsm.Decide(&paid.Next, e(2, fsm.Created)), "v2 CREATED → stale, order at v3"},
		{e(5, fsm.Shipped), fsm.Decide(&cancelled.Next, e(5, fsm.Shipped)), "v5 SHIPPED → illegal after CANCELLED"},
		{e(2, fsm.Created), fsm.Decision{Outcome: fsm.Conflict, Next: paid.Next}, "v2 CREATED → conflict, parked"},
		{e(3, fsm.Paid), fsm.Decide(&paid.Next, e(3, fsm.Paid)), "v3 PAID → duplicate"},
	} {
		if got := DecisionSummary(c.e, c.d); got != c.want {
			t.Errorf("DecisionSummary = %q, want %q", got, c.want)
		}
	}
	if got := PointsSummary(fsm.Refund, -943, 4); got != "-943 points (refund) for user 4" {
		t.Errorf("PointsSummary = %q", got)
	}
}

// The workflow's current details show the status, version, points and
// counts, and the last decision; the metadata query returns them.
func TestCurrentDetails(t *testing.T) {
	h := newHarness(t, "D-1")
	a := ev("D-1", 2, fsm.Paid, 94321)
	b := ev("D-1", 2, fsm.Paid, 1) // same key, other content
	h.send(0, ev("D-1", 1, fsm.Created, 94321), a, a, b)
	h.send(time.Second, ev("D-1", 1, fsm.Created, 94321), ev("D-1", 4, fsm.Shipped, 94321))
	var mid, end string
	metadata := func() string {
		v, err := h.env.QueryWorkflow(api.QueryMetadata)
		if err != nil {
			t.Fatalf("metadata query: %v", err)
		}
		var md sdkpb.WorkflowMetadata
		if err := v.Get(&md); err != nil {
			t.Fatalf("decode metadata: %v", err)
		}
		return md.GetCurrentDetails()
	}
	h.env.RegisterDelayedCallback(func() { mid = metadata() }, 500*time.Millisecond)
	h.env.RegisterDelayedCallback(func() { end = metadata() }, 2*time.Second)
	h.run(Input{Params: params()})
	want := "**PAID** v2 · +943 points\napplied 2 · stale 0 · duplicate 1 · conflict 1 · illegal 0\nlast: v2 PAID → conflict, parked"
	if mid != want {
		t.Errorf("details after the first signals:\n%s\nwant\n%s", mid, want)
	}
	want = "**SHIPPED** v4 · +943 points\napplied 3 · stale 0 · duplicate 2 · conflict 1 · illegal 0 · 1 gap\nlast: v4 SHIPPED → applied, over a gap"
	if end != want {
		t.Errorf("details at the end:\n%s\nwant\n%s", end, want)
	}
	if !strings.Contains(CurrentDetails(State{}, ""), "no order row yet") {
		t.Error("details of an order without a row")
	}
}
