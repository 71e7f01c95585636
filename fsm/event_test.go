package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	good := ev("o:1_a.b-c", 1, Created, 0)
	if err := good.Validate(); err != nil {
		t.Fatalf("valid event rejected: %v", err)
	}
	cases := []struct {
		field string
		edit  func(e *Event)
	}{
		{"event_id", func(e *Event) { e.EventID = "" }},
		{"order_id", func(e *Event) { e.OrderID = "" }},
		{"order_id", func(e *Event) { e.OrderID = "has space" }},
		{"order_id", func(e *Event) { e.OrderID = strings.Repeat("x", 65) }},
		{"order_id", func(e *Event) { e.OrderID = "ünï" }},
		{"user_id", func(e *Event) { e.UserID = 0 }},
		{"user_id", func(e *Event) { e.UserID = -3 }},
		{"status", func(e *Event) { e.Status = "" }},
		{"status", func(e *Event) { e.Status = "REFUNDED" }},
		{"version", func(e *Event) { e.Version = 0 }},
		{"version", func(e *Event) { e.Version = -1 }},
		{"amount_cents", func(e *Event) { e.AmountCents = -1 }},
		{"occurred_at", func(e *Event) { e.OccurredAt = time.Time{} }},
	}
	for _, c := range cases {
		e := good
		c.edit(&e)
		err := e.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%+v: got %v, want a %s error", e, err, c.field)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("error %q does not name %s", err, c.field)
		}
	}
	long := good
	long.OrderID = strings.Repeat("x", 64)
	if err := long.Validate(); err != nil {
		t.Errorf("64-character order ID rejected: %v", err)
	}
}

func TestContentHash(t *testing.T) {
	e := ev("o-1", 3, Paid, 1000)
	h := e.ContentHash()
	if len(h) != 64 {
		t.Fatalf("hash %q", h)
	}
	same := e
	same.EventID, same.ProducerID, same.Seq = "other", "p", 42
	same.OccurredAt = e.OccurredAt.In(time.FixedZone("X", 3600)).Add(500 * time.Nanosecond)
	if same.ContentHash() != h {
		t.Error("tracing fields, time zone or sub-microsecond precision changed the content hash")
	}
	for name, edit := range map[string]func(*Event){
		"order_id":     func(e *Event) { e.OrderID = "o-2" },
		"version":      func(e *Event) { e.Version = 4 },
		"user_id":      func(e *Event) { e.UserID = 8 },
		"status":       func(e *Event) { e.Status = Shipped },
		"amount_cents": func(e *Event) { e.AmountCents = 1001 },
		"occurred_at":  func(e *Event) { e.OccurredAt = e.OccurredAt.Add(time.Microsecond) },
	} {
		d := e
		edit(&d)
		if d.ContentHash() == h {
			t.Errorf("changing %s kept the content hash", name)
		}
	}
	if k := e.Key(); k.String() != "o-1@3" {
		t.Errorf("key %q", k)
	}
}
