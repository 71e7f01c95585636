package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

func newStore(t testing.TB) *store.Store {
	t.Helper()
	db, _ := testenv.NewDatabase(t)
	return store.New(db)
}

func TestParkDeadLetterRepeatCounts(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	dl := wire.DeadLetter{Envelope: wire.NewEnvelope("T", "m-1", "o-1", "PAID",
		[]byte(`{"order_id": 1`), time.Time{}, false), Reason: "malformed JSON: unexpected end of input"}
	first, err := s.ParkDeadLetter(ctx, dl)
	if err != nil || !first.New || first.TimesSeen != 1 || first.ID == 0 {
		t.Fatalf("first: %+v %v", first, err)
	}
	again := dl
	again.MessageID = "m-2" // a producer retry: new message ID, same message
	again.Reason = "another reason"
	second, err := s.ParkDeadLetter(ctx, again)
	if err != nil || second.New || second.TimesSeen != 2 || second.ID != first.ID || second.Fingerprint != first.Fingerprint {
		t.Fatalf("repeat: %+v %v (first %+v)", second, err, first)
	}
	other := dl
	other.Body = []byte(`{"order_id": 2`)
	third, err := s.ParkDeadLetter(ctx, other)
	if err != nil || !third.New || third.ID == first.ID {
		t.Fatalf("other body: %+v %v", third, err)
	}
	var row struct {
		MessageID string
		Reason    string
		TimesSeen int
		Body      []byte
	}
	if err := s.DB().Raw(`SELECT message_id, reason, times_seen, body FROM dead_letters WHERE id = ?`, first.ID).Scan(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.MessageID != "m-1" || row.Reason != dl.Reason || row.TimesSeen != 2 || string(row.Body) != string(dl.Body) {
		t.Errorf("stored %+v", row)
	}

	// Raw bytes that are not text are stored, not refused.
	odd := wire.DeadLetter{Envelope: wire.NewEnvelope("", "", "bad\xff\x00key", "\xfe", []byte{0, 0xff, 0xfe}, time.Time{}, false),
		Reason: strings.Repeat("long reason ", 200)}
	res, err := s.ParkDeadLetter(ctx, odd)
	if err != nil || !res.New {
		t.Fatalf("binary message: %+v %v", res, err)
	}
	var stored struct {
		Keys   string
		Reason string
		Body   []byte
	}
	if err := s.DB().Raw(`SELECT keys, reason, body FROM dead_letters WHERE id = ?`, res.ID).Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if stored.Keys != "bad\uFFFDkey" || len([]rune(stored.Reason)) != 1024 || string(stored.Body) != string(odd.Body) {
		t.Errorf("stored %q / %d-character reason / %v", stored.Keys, len([]rune(stored.Reason)), stored.Body)
	}
}
