package fsm

import (
	"fmt"
	"testing"
	"time"
)

// wantReach is the lifecycle of docs/design.md written out by hand, independent
// of the looplab/fsm definition: wantReach[from] lists every status reachable
// from `from` in zero or more steps.
var wantReach = map[Status][]Status{
	Created:   {Created, Paid, Shipped, Delivered, Completed, Cancelled},
	Paid:      {Paid, Shipped, Delivered, Completed, Cancelled},
	Shipped:   {Shipped, Delivered, Completed},
	Delivered: {Delivered, Completed},
	Completed: {Completed},
	Cancelled: {Cancelled},
}

// paidStatus is docs/design.md's rule written by hand: purchase points are due
// at every status from PAID on but CANCELLED.
func paidStatus(s Status) bool { return s != Created && s != Cancelled }

func reaches(from, to Status) bool {
	for _, s := range wantReach[from] {
		if s == to {
			return true
		}
	}
	return false
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)

func ev(id string, v int64, s Status, amount int64) Event {
	return Event{EventID: fmt.Sprintf("%s-%d-%s", id, v, s), OrderID: id, UserID: 7, Status: s,
		Version: v, AmountCents: amount, OccurredAt: t0.Add(time.Duration(v) * time.Minute)}
}

func TestCanReachMatchesLifecycle(t *testing.T) {
	for _, from := range Statuses {
		for _, to := range Statuses {
			if got, want := CanReach(from, to), reaches(from, to); got != want {
				t.Errorf("CanReach(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if CanReach("LOST", Created) || CanReach(Created, "LOST") {
		t.Error("CanReach accepts an unknown status")
	}
}

func TestStatusPredicates(t *testing.T) {
	for _, s := range Statuses {
		if !s.Valid() {
			t.Errorf("%s not Valid", s)
		}
		if got, want := s.Terminal(), s == Completed || s == Cancelled; got != want {
			t.Errorf("%s.Terminal() = %v", s, got)
		}
		if got, want := s.EarnsPurchase(), paidStatus(s); got != want {
			t.Errorf("%s.EarnsPurchase() = %v", s, got)
		}
	}
	for _, s := range []Status{"", "created", "LOST"} {
		if s.Valid() {
			t.Errorf("%q is Valid", s)
		}
	}
}

// TestDecideEveryPair judges an event of every status against a stored
// order of every status, for every relation of their versions and contents,
// and for every points history the stored status allows.
func TestDecideEveryPair(t *testing.T) {
	type history struct{ purchased, refunded bool }
	histories := func(s Status) []history {
		switch {
		case s == Created:
			return []history{{false, false}}
		case s == Cancelled:
			return []history{{false, false}, {true, true}}
		default:
			return []history{{true, false}}
		}
	}
	relations := []string{"older", "equal-same", "equal-different", "next", "gap"}
	const storedVersion = 5
	// judged counts the cases whose outcome was decided and checked: it is
	// incremented inside the subtest, past the outcome check.
	judged := 0
	for _, from := range Statuses {
		for _, h := range histories(from) {
			for _, to := range Statuses {
				for _, rel := range relations {
					name := fmt.Sprintf("%s(purchased=%v,refunded=%v)/%s/%s", from, h.purchased, h.refunded, to, rel)
					t.Run(name, func(t *testing.T) {
						storedEv := ev("o-1", storedVersion, from, 25_000)
						o := Order{OrderID: "o-1", UserID: 7, Status: from, Version: storedVersion,
							AmountCents: 25_000, ContentHash: storedEv.ContentHash(),
							Purchased: h.purchased, Refunded: h.refunded}
						if h.purchased {
							o.PurchasePoints = 200 // earned at an earlier amount
						}
						var e Event
						switch rel {
						case "older":
							e = ev("o-1", storedVersion-2, to, 9_999)
						case "equal-same":
							if to != from {
								t.Skip("same content implies same status")
							}
							e = storedEv
							e.EventID, e.ProducerID, e.Seq = "redelivered", "p-2", 99
						case "equal-different":
							e = ev("o-1", storedVersion, to, 25_001)
						case "next":
							e = ev("o-1", storedVersion+1, to, 31_050)
						case "gap":
							e = ev("o-1", storedVersion+3, to, 31_050)
						}
						before := o
						d := Decide(&o, e)
						if o != before {
							t.Fatalf("Decide modified the stored order")
						}
						if d2 := Decide(&o, e); d2 != d {
							t.Fatalf("Decide is not deterministic: %+v then %+v", d, d2)
						}

						var want Outcome
						switch {
						case rel == "older":
							want = Stale
						case rel == "equal-same":
							want = Duplicate
						case rel == "equal-different":
							want = Conflict
						case reaches(from, to):
							want = Applied
						default:
							want = Illegal
						}
						if d.Outcome != want {
							t.Fatalf("outcome %s, want %s (%+v)", d.Outcome, want, d)
						}
						judged++
						if want != Applied {
							if d.Next != o || d.Points != PointsNone || d.PointsDelta != 0 || d.Gap {
								t.Errorf("not applied, yet effects: %+v", d)
							}
							if want != Duplicate && d.Reason == "" {
								t.Errorf("%s without a reason", want)
							}
							return
						}
						n := d.Next
						if n.Status != to || n.Version != e.Version || n.AmountCents != e.AmountCents ||
							n.UserID != e.UserID || n.ContentHash != e.ContentHash() || n.OrderID != "o-1" {
							t.Errorf("next order %+v does not reflect event %+v", n, e)
						}
						if d.Gap != (rel == "gap") {
							t.Errorf("gap = %v for %s", d.Gap, rel)
						}
						switch {
						case paidStatus(to) && !h.purchased:
							if d.Points != Purchase || d.PointsDelta != 310 || !n.Purchased || n.PurchasePoints != 310 {
								t.Errorf("want purchase of 310: %+v", d)
							}
						case to == Cancelled && h.purchased && !h.refunded:
							if d.Points != Refund || d.PointsDelta != -200 || !n.Refunded || n.PurchasePoints != 200 {
								t.Errorf("want refund of 200: %+v", d)
							}
						default:
							if d.Points != PointsNone || d.PointsDelta != 0 ||
								n.Purchased != h.purchased || n.Refunded != h.refunded || n.PurchasePoints != o.PurchasePoints {
								t.Errorf("want no points effect: %+v", d)
							}
						}
					})
				}
			}
		}
	}
	// 7 stored (status, points history) pairs, each against 6 statuses in
	// 4 relations, and in "equal-same" against its own status only.
	if want := 7 * (6*4 + 1); judged != want {
		t.Errorf("judged %d cases, want %d", judged, want)
	}
}

func TestDecideNewOrder(t *testing.T) {
	for _, s := range Statuses {
		for _, v := range []int64{1, 4} {
			e := ev("o-new", v, s, 1_999)
			d := Decide(nil, e)
			if d.Outcome != Applied || d.Next.Status != s || d.Next.Version != v || d.Gap != (v > 1) {
				t.Errorf("%s@%d on a new order: %+v", s, v, d)
			}
			if paidStatus(s) {
				if d.Points != Purchase || d.PointsDelta != 19 || !d.Next.Purchased {
					t.Errorf("%s@%d on a new order: want purchase of 19, got %+v", s, v, d)
				}
			} else if d.Points != PointsNone || d.Next.Purchased || d.Next.Refunded {
				t.Errorf("%s@%d on a new order: want no points, got %+v", s, v, d)
			}
		}
	}
}

func TestPurchaseOfZeroPointsStillCounts(t *testing.T) {
	d := Decide(nil, ev("o-0", 1, Paid, 99))
	if d.Points != Purchase || d.PointsDelta != 0 || !d.Next.Purchased {
		t.Fatalf("purchase of 99 cents: %+v", d)
	}
	d = Decide(&d.Next, ev("o-0", 2, Cancelled, 99))
	if d.Points != Refund || d.PointsDelta != 0 || !d.Next.Refunded {
		t.Fatalf("refund of a 0-point purchase: %+v", d)
	}
}

func TestScenarios(t *testing.T) {
	type step struct {
		v      int64
		s      Status
		amount int64
		want   Outcome
		points int64
	}
	cases := map[string][]step{
		"cancel after pay nets zero": {{1, Created, 500, Applied, 0}, {2, Paid, 500, Applied, 5}, {3, Cancelled, 500, Applied, -5}},
		"cancel before pay":          {{1, Created, 500, Applied, 0}, {2, Cancelled, 500, Applied, 0}, {3, Paid, 500, Illegal, 0}},
		"first seen at shipped":      {{3, Shipped, 1234, Applied, 12}, {1, Created, 1234, Stale, 0}, {2, Paid, 1234, Stale, 0}},
		"amount update after pay":    {{1, Paid, 1000, Applied, 10}, {2, Paid, 5000, Applied, 0}, {3, Completed, 5000, Applied, 0}},
		"shipped after cancelled":    {{1, Paid, 300, Applied, 3}, {2, Cancelled, 300, Applied, -3}, {3, Shipped, 300, Illegal, 0}, {4, Cancelled, 300, Applied, 0}},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			var o *Order
			for _, st := range steps {
				d := Decide(o, ev("o-s", st.v, st.s, st.amount))
				if d.Outcome != st.want || d.PointsDelta != st.points {
					t.Fatalf("%s@%d: got %s %+d, want %s %+d (%s)", st.s, st.v, d.Outcome, d.PointsDelta, st.want, st.points, d.Reason)
				}
				next := d.Next
				o = &next
			}
		})
	}
}

func TestNewMachineTransitions(t *testing.T) {
	// The arrows of the lifecycle diagram.
	want := map[Status][]Status{
		Created:   {Cancelled, Paid},    // sorted by transition name: cancel, pay
		Paid:      {Cancelled, Shipped}, // cancel, ship
		Shipped:   {Delivered},
		Delivered: {Completed},
		Completed: nil,
		Cancelled: nil,
	}
	for _, from := range Statuses {
		got := nextStatuses(from)
		if fmt.Sprint(got) != fmt.Sprint(want[from]) {
			t.Errorf("transitions from %s: %v, want %v", from, got, want[from])
		}
	}
}
