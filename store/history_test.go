package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// OrderHistory returns every business key in version order with its
// decision, the ledger and the dead letters, and finds the gaps.
func TestOrderHistory(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	id := uniq.Name("hist")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ev := func(v int64, st fsm.Status) fsm.Event {
		return fsm.Event{EventID: "e", OrderID: id, UserID: 9, Status: st, Version: v, AmountCents: 94321,
			OccurredAt: at.Add(time.Duration(v) * time.Minute)}
	}
	other := ev(3, fsm.Paid)
	other.AmountCents = 1
	// v1, v3 over a gap, v6 over another, a conflicting copy of v3, and a
	// late v4 (stale). v2 and v5 are never seen.
	for _, e := range []fsm.Event{ev(1, fsm.Created), ev(3, fsm.Paid), ev(6, fsm.Shipped), other, ev(4, fsm.Paid)} {
		// A conflict is parked with the event re-encoded (no body given).
		res, err := s.ApplyEvent(ctx, e, wire.Envelope{MessageID: uniq.Name("m")})
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Decision; d.Points != fsm.PointsNone {
			if _, err := s.AwardPoints(ctx, store.PointsRow{OrderID: id, UserID: e.UserID, Kind: d.Points,
				Points: d.PointsDelta, Version: e.Version}); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := s.OrderHistory(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Found || h.Order.Status != fsm.Shipped || h.Order.Version != 6 || h.Order.EventsPrunedAt != nil {
		t.Fatalf("order %+v", h.Order)
	}
	var got []int64
	for _, e := range h.Events {
		got = append(got, e.Version)
	}
	if len(got) != 4 || got[0] != 1 || got[1] != 3 || got[2] != 4 || got[3] != 6 {
		t.Fatalf("versions %v, want [1 3 4 6]", got)
	}
	v3, _ := h.Event(3)
	if v3.Outcome != fsm.Applied || !v3.Gap || v3.PointsKind != fsm.Purchase || v3.PointsDelta != 943 ||
		v3.Conflicts != 1 || v3.TimesSeen != 1 || len(v3.MessageIDs) != 1 {
		t.Errorf("v3 %+v", v3)
	}
	if v4, _ := h.Event(4); v4.Outcome != fsm.Stale || v4.Reason == "" {
		t.Errorf("v4 %+v", v4)
	}
	if len(h.Ledger) != 1 || h.Ledger[0].Kind != fsm.Purchase || h.Ledger[0].Points != 943 || h.Ledger[0].UserID != 9 {
		t.Errorf("ledger %+v", h.Ledger)
	}
	if len(h.DeadLetters) != 1 || h.DeadLetters[0].Kind() != "conflict" {
		t.Errorf("dead letters %+v", h.DeadLetters)
	}
	for v, want := range map[int64]int64{2: 3, 5: 6, 7: 0} {
		if got := h.InGap(v); got != want {
			t.Errorf("InGap(%d) = %d, want %d", v, got, want)
		}
	}
	if _, ok := h.Event(2); ok {
		t.Error("v2 reported as recorded")
	}

	unknown, err := s.OrderHistory(ctx, uniq.Name("nobody"))
	if err != nil || !unknown.Empty() {
		t.Errorf("unknown order: %+v %v", unknown, err)
	}
	if _, err := s.OrderHistory(ctx, "bad id!"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("invalid order ID: %v", err)
	}
}
