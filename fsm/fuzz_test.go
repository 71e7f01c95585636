package fsm

import (
	"fmt"
	"testing"
)

// byteSource hands out fuzz input a byte at a time, then zeros.
type byteSource struct {
	b []byte
	i int
}

func (s *byteSource) next() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

// nextOf lists the lifecycle arrows, written out by hand.
var nextOf = map[Status][]Status{
	Created:   {Paid, Cancelled},
	Paid:      {Shipped, Cancelled},
	Shipped:   {Delivered},
	Delivered: {Completed},
}

// lifecyclePath builds a lifecycle path as a producer would publish it:
// versions 1, 2, 3, ... starting at CREATED; each next event either moves
// along an arrow (including the cancel branches) or repeats the status with
// new data.
func lifecyclePath(src *byteSource, orderID string) []Event {
	status := Created
	amount := int64(src.next()) * 137
	var path []Event
	for v := int64(1); ; v++ {
		path = append(path, ev(orderID, v, status, amount))
		if len(path) >= 12 {
			return path
		}
		c := src.next()
		opts := nextOf[status]
		switch {
		case c%8 == 7: // stop here
			return path
		case c%8 >= 5 || len(opts) == 0: // data update
			if len(opts) == 0 && c%2 == 0 {
				return path
			}
			amount = int64(src.next()) * 211
		default:
			status = opts[int(c)%len(opts)]
			if c&0x40 != 0 {
				amount = int64(src.next()) * 97
			}
		}
	}
}

// FuzzLifecycle checks the decision function against a delivery model: for
// any lifecycle path, delivered in any order, with any event lost, repeated
// or re-sent with conflicting content, feeding the deliveries one by one
// through Decide
//
//   - applies exactly the deliveries whose version is higher than every
//     version applied before (so the order ends at the highest delivered
//     version, and its version never decreases), judges an equal version
//     duplicate or conflict by content and a lower one stale, and never
//     judges anything illegal (every status of a path is reachable from the
//     statuses before it);
//   - flags a gap exactly when an applied version skips one;
//   - awards the purchase at most once, at the first applied paid status,
//     worth that event's amount / 100; refunds at most once, only when the
//     order is applied at CANCELLED after a purchase, by the same points;
//   - nets the purchase points, or zero when the order ends CANCELLED.
func FuzzLifecycle(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{10, 0, 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{200, 1, 5, 0, 9, 0, 0, 7, 3, 3, 3, 0, 1, 2, 200, 100, 50})
	f.Add([]byte{50, 65, 20, 1, 6, 30, 0, 0, 7, 255, 254, 253, 1, 0, 3, 9, 17, 33})
	f.Add([]byte{77, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{b: data}
		path := lifecyclePath(src, "o-fuzz")

		// Deliveries: each event lost, delivered once, or repeated; some
		// re-sent with conflicting content (same key, other amount).
		var deliveries []Event
		for _, e := range path {
			c := src.next()
			copies := int(c % 4) // 0: lost
			if len(deliveries) == 0 && copies == 0 {
				copies = 1 // deliver something
			}
			for range copies {
				d := e
				d.EventID = fmt.Sprintf("%s#%d", e.EventID, src.next()) // tracing fields vary
				deliveries = append(deliveries, d)
			}
			if c&0x80 != 0 {
				x := e
				x.AmountCents += 1 + int64(src.next())
				deliveries = append(deliveries, x)
			}
		}
		for i := len(deliveries) - 1; i > 0; i-- { // Fisher-Yates, driven by input
			j := int(src.next()) % (i + 1)
			deliveries[i], deliveries[j] = deliveries[j], deliveries[i]
		}

		var (
			o                  *Order
			model              *Event // last applied delivery
			purchases, refunds int
			net, purchasePts   int64
			wantPurchasePts    int64
			wantPurchased      bool
			maxDelivered       int64
		)
		for i, d := range deliveries {
			maxDelivered = max(maxDelivered, d.Version)
			dec := Decide(o, d)

			var want Outcome
			switch {
			case model == nil || d.Version > model.Version:
				want = Applied
			case d.Version == model.Version && d.ContentHash() == model.ContentHash():
				want = Duplicate
			case d.Version == model.Version:
				want = Conflict
			default:
				want = Stale
			}
			if dec.Outcome != want {
				t.Fatalf("delivery %d (%s %s %d¢): outcome %s, want %s (order %+v)",
					i, d.Key(), d.Status, d.AmountCents, dec.Outcome, want, o)
			}
			if want == Applied {
				prev := int64(0)
				if model != nil {
					prev = model.Version
				}
				if dec.Gap != (d.Version > prev+1) {
					t.Fatalf("delivery %d (%s): gap %v after version %d", i, d.Key(), dec.Gap, prev)
				}
				if !wantPurchased && d.Status.EarnsPurchase() {
					wantPurchased, wantPurchasePts = true, d.AmountCents/100
				}
				m := d
				model = &m
			} else if dec.Gap || dec.Points != PointsNone || (o != nil && dec.Next != *o) {
				t.Fatalf("delivery %d (%s): %s with effects %+v", i, d.Key(), dec.Outcome, dec)
			}
			if o != nil && dec.Next.Version < o.Version {
				t.Fatalf("version went back from %d to %d", o.Version, dec.Next.Version)
			}

			switch dec.Points {
			case Purchase:
				purchases++
				purchasePts = dec.PointsDelta
				if purchases > 1 || d.Status != model.Status || !d.Status.EarnsPurchase() {
					t.Fatalf("delivery %d (%s %s): purchase #%d", i, d.Key(), d.Status, purchases)
				}
				if dec.PointsDelta != wantPurchasePts {
					t.Fatalf("purchase of %d points, want %d", dec.PointsDelta, wantPurchasePts)
				}
			case Refund:
				refunds++
				if refunds > 1 || purchases != 1 || d.Status != Cancelled || dec.PointsDelta != -purchasePts {
					t.Fatalf("delivery %d (%s %s): refund #%d of %d after %d purchases of %d",
						i, d.Key(), d.Status, refunds, dec.PointsDelta, purchases, purchasePts)
				}
			case PointsNone:
				if dec.PointsDelta != 0 {
					t.Fatalf("no points kind but delta %d", dec.PointsDelta)
				}
			}
			net += dec.PointsDelta
			next := dec.Next
			o = &next
		}

		if o == nil || model == nil {
			t.Fatal("no delivery applied")
		}
		if o.Version != maxDelivered || o.Version != model.Version || o.Status != model.Status ||
			o.AmountCents != model.AmountCents || o.ContentHash != model.ContentHash() {
			t.Fatalf("final order %+v, want the highest-version delivery %+v", o, model)
		}
		if (purchases == 1) != wantPurchased || o.Purchased != wantPurchased {
			t.Fatalf("%d purchases, order purchased %v, want %v", purchases, o.Purchased, wantPurchased)
		}
		wantNet := wantPurchasePts
		if o.Status == Cancelled || !wantPurchased {
			wantNet = 0
		}
		if net != wantNet {
			t.Fatalf("net points %d, want %d (purchases %d, refunds %d, final %s)", net, wantNet, purchases, refunds, o.Status)
		}
		if o.Refunded != (refunds == 1) {
			t.Fatalf("order refunded %v after %d refunds", o.Refunded, refunds)
		}
	})
}
