package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/orderflow/orderflow/internal/compresstest"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/wire"
)

// javaBody is the body a Java producer sends for e: the contract's fields
// and a field the contract does not define that takes it to 4 KiB or more,
// the size from which the RocketMQ Java client compresses.
func javaBody(t *testing.T, e fsm.Event) []byte {
	t.Helper()
	body, err := json.Marshal(struct {
		fsm.Event
		Note string `json:"note"`
	}{e, strings.Repeat("a note the contract ignores; ", 160)})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) < 4096 {
		t.Fatalf("body of %d bytes: the Java client would not compress it", len(body))
	}
	return body
}

// dlq replay recovers the events of the old bug: a Java producer's zstd
// and LZ4 bodies, which earlier releases parked as malformed_json still
// compressed, are decoded by their magic number, applied and marked; so is
// a body parked with its compression stored. Bodies that cannot be
// recovered stay as they are: a bomb (oversize), a corrupt body with its
// compression stored (undecodable), a corrupt one recognised only by its
// magic number (judged as parked).
func TestDLQReplayRecoversCompressedBodies(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	z, l, g, s, x := uniq.Name("rpz-zstd"), uniq.Name("rpz-lz4"), uniq.Name("rpz-zlib"), uniq.Name("rpz-stored"), uniq.Name("rpz-x")
	events := map[string]fsm.Event{
		z: event(z, 1, fsm.Created, 1250),
		l: event(l, 1, fsm.Created, 3300),
		g: event(g, 1, fsm.Created, 800),
		s: event(s, 1, fsm.Created, 990),
	}
	p.ids = append(p.ids, z, l, g, s)
	// The reason an earlier release gave a compressed body it took for JSON.
	const oldReason = "malformed_json: invalid character '(' looking for beginning of value"
	park := func(orderID string, body []byte, compression, reason string) int64 {
		t.Helper()
		env := wire.NewEnvelope("ORDER_EVENTS", uniq.Name("MSG"), orderID, "CREATED", body, time.Time{}, false)
		env.Compression = compression
		r, err := p.s.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: env, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	bomb := compresstest.Zstd(t, make([]byte, 1<<20))
	corrupt := compresstest.Zstd(t, javaBody(t, event(uniq.Name("rpz-corrupt"), 1, fsm.Created, 1)))
	corrupt = corrupt[:len(corrupt)-6]
	ids := map[string]int64{
		"zstd (old bug)": park(z, compresstest.Zstd(t, javaBody(t, events[z])), "", oldReason),
		"lz4 (old bug)":  park(l, compresstest.LZ4(t, javaBody(t, events[l])), "", "malformed_json: invalid character '\\x04' looking for beginning of value"),
		"zlib (old bug)": park(g, compresstest.Zlib(t, javaBody(t, events[g])), "", "malformed_json: invalid character 'x' looking for beginning of value"),
		// Parked with its compression by a bridge whose decoder failed.
		"lz4, stored":       park(s, compresstest.LZ4(t, javaBody(t, events[s])), "lz4", "undecodable: lz4 body: a decoder's bug"),
		"zstd bomb":         park(x, bomb, "zstd", message.OversizeCompressed().Reason),
		"corrupt, stored":   park(x, corrupt, "zstd", "undecodable: zstd body: unexpected EOF"),
		"corrupt (old bug)": park(x+"-2", corrupt, "", oldReason),
	}
	type want struct{ now, action, compression, reason string }
	wants := map[string]want{
		"zstd (old bug)":    {"applied", actionDelivered, "zstd", ""},
		"lz4 (old bug)":     {"applied", actionDelivered, "lz4", ""},
		"zlib (old bug)":    {"applied", actionDelivered, "zlib", ""},
		"lz4, stored":       {"applied", actionDelivered, "lz4", ""},
		"zstd bomb":         {nowInvalid, actionKept, "zstd", "oversize: compressed body inflates past 65536 bytes"},
		"corrupt, stored":   {nowInvalid, actionKept, "zstd", "undecodable: zstd body: "},
		"corrupt (old bug)": {nowInvalid, actionKept, "", "malformed_json: "},
	}

	code, out, errOut := runCmd(append(append([]string{"dlq", "replay"}, p.env()...), "-json")...)
	var r replayOutput
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("dlq replay: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	got := map[int64]replayItem{}
	for _, it := range r.Items {
		got[it.ID] = it
	}
	for name, w := range wants {
		it := got[ids[name]]
		if it.Now != w.now || it.Action != w.action || it.Compression != w.compression || !strings.HasPrefix(it.Reason, w.reason) {
			t.Errorf("%s: now %q, action %q, compression %q, reason %q; want %q, %q, %q, %q", name, it.Now, it.Action,
				it.Compression, it.Reason, w.now, w.action, w.compression, w.reason)
		}
	}

	// The orders and their events in PostgreSQL are those the test built.
	for name, id := range map[string]string{"zstd (old bug)": z, "lz4 (old bug)": l, "zlib (old bug)": g, "lz4, stored": s} {
		e := events[id]
		var o struct {
			Status      string
			Version     int64
			AmountCents int64
			UserID      int64
		}
		if err := p.db.Raw(`SELECT status, version, amount_cents, user_id FROM orders WHERE order_id = ?`, id).Scan(&o).Error; err != nil {
			t.Fatal(err)
		}
		if o.Status != "CREATED" || o.Version != 1 || o.AmountCents != e.AmountCents || o.UserID != 42 {
			t.Errorf("%s: order %s is %+v, want CREATED at version 1, %d cents, user 42", name, id, o, e.AmountCents)
		}
		var ev struct {
			EventID     string
			Status      string
			AmountCents int64
			OccurredAt  time.Time
			Outcome     string
			MessageIDs  string
		}
		if err := p.db.Raw(`SELECT event_id, status, amount_cents, occurred_at, outcome,
				array_to_string(message_ids, ' ') AS message_ids FROM order_events
			WHERE order_id = ? AND version = 1`, id).Scan(&ev).Error; err != nil {
			t.Fatal(err)
		}
		dl, _, err := p.s.DeadLetter(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if ev.EventID != id+"-v1" || ev.Status != "CREATED" || ev.AmountCents != e.AmountCents ||
			!ev.OccurredAt.Equal(time.Date(2026, 4, 1, 9, 1, 0, 0, time.UTC)) || ev.Outcome != "applied" ||
			ev.MessageIDs != dl.MessageID {
			t.Errorf("%s: event of %s is %+v, want %s-v1 CREATED, %d cents, applied, from message %s", name, id, ev, id,
				e.AmountCents, dl.MessageID)
		}
		if dl.ReplayOutcome != "applied" || dl.ReplayedAt == nil {
			t.Errorf("%s: dead letter after the replay: replayed %v, outcome %q", name, dl.ReplayedAt, dl.ReplayOutcome)
		}
	}
	// The dead letters keep their stored bytes and compression.
	for name, w := range map[string][]byte{"zstd bomb": bomb, "corrupt, stored": corrupt} {
		dl, _, err := p.s.DeadLetter(ctx, ids[name])
		if err != nil || !bytes.Equal(dl.Body, w) || dl.BodyCompression != "zstd" || dl.ReplayedAt != nil {
			t.Errorf("%s after the replay: %d bytes, compression %q, replayed %v (%v)", name, len(dl.Body), dl.BodyCompression,
				dl.ReplayedAt, err)
		}
	}
	if code, out, errOut := runCmd("dlq", "show", "-database-url", p.dsn, fmt.Sprint(ids["zstd bomb"])); code != 0 ||
		!strings.Contains(out, "compression: zstd (the body as stored)") {
		t.Errorf("dlq show of a compressed dead letter: exit %d\n%s%s", code, out, errOut)
	}
}
