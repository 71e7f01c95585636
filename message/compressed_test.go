package message

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/orderflow/orderflow/wire"
)

// A body the consumer left compressed is never read as JSON: refused for
// its size it is oversize, otherwise undecodable with the compression and
// the decoder's error; the dead letter keeps the stored bytes and the
// compression.
func TestParseStillCompressedBodies(t *testing.T) {
	stored := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58}
	env := func(refused bool, compression, decodeErr string, body []byte) wire.Envelope {
		e := wire.NewEnvelope("ORDER_EVENTS", "M1", "o-1", "PAID", body, time.Time{}, refused)
		e.Compression, e.DecodeError = compression, decodeErr
		return e
	}
	for _, c := range []struct {
		name       string
		env        wire.Envelope
		kind       string
		reason     string
		compressed bool
	}{
		{"undecodable zstd", env(false, "zstd", "unexpected EOF", stored), wire.KindUndecodable,
			"undecodable: zstd body: unexpected EOF", true},
		{"undecodable lz4", env(false, "lz4", "lz4: bad magic number", stored), wire.KindUndecodable,
			"undecodable: lz4 body: lz4: bad magic number", true},
		{"unknown type", env(false, "type 5", "unknown compression type 5", stored), wire.KindUndecodable,
			"undecodable: type 5 body: unknown compression type 5", true},
		{"no error given", env(false, "zlib", "", stored), wire.KindUndecodable, "undecodable: zlib body: not decoded", true},
		// A valid event's bytes, still marked compressed: not taken as the event.
		{"valid JSON marked compressed", env(false, "zstd", "magic number mismatch", []byte(validBody)), wire.KindUndecodable,
			"undecodable: zstd body: magic number mismatch", true},
		{"zstd bomb", env(true, "zstd", "", stored), wire.KindOversize, "oversize: compressed body inflates past 65536 bytes", true},
		{"zlib bomb of an older bridge", env(true, "", "", stored), wire.KindOversize,
			"oversize: compressed body inflates past 65536 bytes", true},
		{"not JSON, not compressed", env(false, "", "", stored), wire.KindMalformedJSON, "", false},
	} {
		r := Parse(c.env)
		if r.Rejection == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if r.Rejection.Kind != c.kind || c.reason != "" && r.Rejection.Reason != c.reason {
			t.Errorf("%s: %s %q, want %s %q", c.name, r.Rejection.Kind, r.Rejection.Reason, c.kind, c.reason)
		}
		d := r.DeadLetter
		if d.Reason != r.Rejection.Reason || !bytes.Equal(d.Body, c.env.Body) || d.Compression != c.env.Compression {
			t.Errorf("%s: dead letter %q, %d bytes, compression %q", c.name, d.Reason, len(d.Body), d.Compression)
		}
		if c.env.StillCompressed() != c.compressed {
			t.Errorf("%s: StillCompressed %v", c.name, !c.compressed)
		}
	}
}

// A body as the producer wrote it (Compression "") is decoded as usual.
func TestParseDecodedBody(t *testing.T) {
	r := Parse(wire.NewEnvelope("ORDER_EVENTS", "M1", "o-1", "PAID", []byte(validBody), time.Time{}, false))
	if r.Rejection != nil || r.Event.OrderID != "o-1" {
		t.Fatalf("valid body: %+v", r)
	}
}

// The decoder's error is quoted, bounded and made storable.
func TestUndecodableReasonIsStorable(t *testing.T) {
	r := Undecodable("zstd", strings.Repeat("\xff\x00é", 600))
	if r.Kind != wire.KindUndecodable || len(r.Reason) > 512 || !utf8.ValidString(r.Reason) || strings.ContainsRune(r.Reason, 0) ||
		!strings.HasPrefix(r.Reason, "undecodable: zstd body: ") {
		t.Fatalf("reason %q", r.Reason)
	}
}
