package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// A dead letter keeps its stored bytes and the compression they are in, and
// reads back with both; its envelope is still compressed, so parsing it
// again never reads it as JSON.
func TestParkDeadLetterKeepsTheCompression(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	stored := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x01}
	park := func(refused bool, compression, reason string, body []byte) store.DeadLetterRow {
		t.Helper()
		env := wire.NewEnvelope("ORDER_EVENTS", "M1", "o-1", "PAID", body, time.Time{}, refused)
		env.Compression = compression
		p, err := s.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: env, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		d, ok, err := s.DeadLetter(ctx, p.ID)
		if err != nil || !ok {
			t.Fatalf("read back %d: %v %v", p.ID, ok, err)
		}
		return d
	}
	for _, c := range []struct {
		name        string
		refused     bool
		compression string
		reason      string
		body        []byte
		wantComp    string // of the envelope read back
		wantKind    string // of parsing it again
	}{
		{"undecodable zstd", false, "zstd", "undecodable: zstd body: unexpected EOF", stored, "zstd", wire.KindUndecodable},
		{"lz4 bomb", true, "lz4", message.OversizeCompressed().Reason, append([]byte{0x04, 0x22, 0x4d, 0x18}, 1), "lz4",
			wire.KindOversize},
		{"unknown type", false, "type 6", "undecodable: type 6 body: unknown compression type 6", []byte{1, 2}, "type 6",
			wire.KindUndecodable},
		// Parked by a bridge of an earlier release: a refused body, no column.
		{"zlib bomb of an older bridge", true, "", message.OversizeCompressed().Reason, []byte{0x78, 0x9c, 0x01}, "zlib",
			wire.KindOversize},
		{"plain", false, "", "malformed_json: unexpected end of JSON input", []byte(`{"a":`), "", wire.KindMalformedJSON},
	} {
		d := park(c.refused, c.compression, c.reason, c.body)
		if d.BodyCompression != c.compression || !bytes.Equal(d.Body, c.body) || d.Reason != c.reason {
			t.Errorf("%s: stored %q, %d bytes, %q", c.name, d.BodyCompression, len(d.Body), d.Reason)
		}
		env := d.Envelope()
		if env.Compression != c.wantComp || env.InflateRefused != c.refused {
			t.Errorf("%s: envelope compression %q, refused %v; want %q, %v", c.name, env.Compression, env.InflateRefused,
				c.wantComp, c.refused)
		}
		if r := message.Parse(env); r.Rejection == nil || r.Rejection.Kind != c.wantKind {
			t.Errorf("%s: parsed again as %+v, want %s", c.name, r.Rejection, c.wantKind)
		}
	}
	env := wire.NewEnvelope("ORDER_EVENTS", "M2", "o-1", "PAID", []byte{9}, time.Time{}, false)
	env.Compression = "gzip"
	if _, err := s.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: env, Reason: "undecodable: gzip body: x"}); err == nil {
		t.Errorf("a compression RocketMQ does not name was stored")
	}
}

// Dead letters an earlier release parked as malformed_json from a
// compressed body are recognised by the format's magic number; other
// bodies, other reasons and rows with a stored compression are not.
func TestLegacyCompression(t *testing.T) {
	const malformed = "malformed_json: invalid character '(' looking for beginning of value"
	for _, c := range []struct {
		body        []byte
		reason      string
		compression string
		want        string
	}{
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58}, malformed, "", "zstd"},
		{[]byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x70}, malformed, "", "lz4"},
		{[]byte{0x78, 0x9c, 0x01}, malformed, "", "zlib"},
		{[]byte{0x78, 0x5e, 0x01}, malformed, "", "zlib"}, // what java.util.zip writes at levels 2-5
		{[]byte{0x78, 0xda, 0x01}, malformed, "", "zlib"},
		{[]byte{0x78, 0xbb, 0x01}, malformed, "", ""}, // a preset dictionary: not the Java client's
		{[]byte{0x78, 0x9d, 0x01}, malformed, "", ""}, // header checksum wrong
		{[]byte(`{"order_id":`), malformed, "", ""},
		{[]byte{0x28, 0xb5, 0x2f}, malformed, "", ""},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "not_object: body is a JSON array, want an object", "", ""},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "undecodable: zstd body: unexpected EOF", "zstd", ""},
	} {
		d := store.DeadLetterRow{Body: c.body, Reason: c.reason, BodyCompression: c.compression}
		if got := d.LegacyCompression(); got != c.want {
			t.Errorf("% x (%s): %q, want %q", c.body, c.reason, got, c.want)
		}
	}
}
