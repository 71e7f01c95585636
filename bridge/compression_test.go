package bridge

import (
	"bytes"
	"context"
	"encoding/binary"
	"github.com/orderflow/orderflow/internal/compresstest"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

// Flags of a compressed message as the Java client 5.3.3 sets them: bit 0,
// and the type in bits 8-10 (LZ4 1, ZSTD 2).
const (
	flagJavaLZ4  int32 = 1 | 1<<8
	flagJavaZstd int32 = 1 | 2<<8
)

// seqBody is a valid event that carries a producer sequence number.
const seqBody = `{"event_id":"e1","order_id":"o-1","user_id":3,"status":"PAID","version":2,"amount_cents":500,` +
	`"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p-1","seq":9}`

// pulled is one message as the client decodes it from a pull result: the
// stored body under sysFlag, inflated under the bridge's 64 KiB bound.
func pulled(t *testing.T, stored []byte, sysFlag int32) *primitive.MessageExt {
	t.Helper()
	defer primitive.SetInflateLimit(primitive.InflateLimit())
	primitive.SetInflateLimit(wire.MaxBodySize)
	b := frame(stored, false)
	binary.BigEndian.PutUint32(b[36:], uint32(sysFlag)) // the system flag, after 36 bytes of header
	msgs := primitive.DecodeMessage(b)
	if len(msgs) != 1 {
		t.Fatalf("%d messages decoded", len(msgs))
	}
	return msgs[0]
}

// An event the Java client sent zstd- or LZ4-compressed is delivered, its
// source the body as the producer wrote it.
func TestHandlerDeliversZstdAndLZ4Events(t *testing.T) {
	for name, m := range map[string]*primitive.MessageExt{
		"zstd": pulled(t, compresstest.Zstd(t, []byte(goodBody)), flagJavaZstd),
		"lz4":  pulled(t, compresstest.LZ4(t, []byte(goodBody)), flagJavaLZ4),
	} {
		var src wire.Envelope
		h := testHandler(t, func(_ context.Context, e fsm.Event, env wire.Envelope) error {
			src = env
			return nil
		}, noPark(t))
		if err := h.Handle(context.Background(), m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(src.Body) != goodBody || src.Compression != "" || src.StillCompressed() {
			t.Errorf("%s: delivered with source body %q, compression %q", name, src.Body, src.Compression)
		}
	}
}

// A compressed body the client cannot decode is parked as undecodable,
// stored bytes and compression kept; no sequence number is read from it,
// even when its stored bytes happen to be JSON.
func TestHandlerParksUndecodableBodies(t *testing.T) {
	z := compresstest.Zstd(t, []byte(seqBody))
	for _, c := range []struct {
		name   string
		stored []byte
		flag   int32
		reason string
		comp   string
	}{
		{"truncated zstd", z[:len(z)-4], flagJavaZstd, "undecodable: zstd body: ", "zstd"},
		{"JSON flagged zstd", []byte(seqBody), flagJavaZstd, "undecodable: zstd body: ", "zstd"},
		{"JSON flagged type 5", []byte(seqBody), 1 | 5<<8, "undecodable: type 5 body: unknown compression type 5", "type 5"},
		{"zstd bomb", compresstest.Zstd(t, make([]byte, 1<<20)), flagJavaZstd, "oversize: compressed body inflates past 65536 bytes", "zstd"},
	} {
		var parked []wire.DeadLetter
		h := testHandler(t, noDeliver(t), func(_ context.Context, dl wire.DeadLetter) error {
			parked = append(parked, dl)
			return nil
		})
		var recorded []int64
		h.record = func(_ context.Context, _ string, seq int64) error {
			recorded = append(recorded, seq)
			return nil
		}
		if err := h.Handle(context.Background(), pulled(t, c.stored, c.flag)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(parked) != 1 {
			t.Fatalf("%s: %d dead letters", c.name, len(parked))
		}
		d := parked[0]
		if len(d.Reason) <= len("undecodable: zstd body: ") || !strings.HasPrefix(d.Reason, c.reason) ||
			!bytes.Equal(d.Body, c.stored) || d.Compression != c.comp {
			t.Errorf("%s: parked %q, %d bytes, compression %q; want a reason starting %q, the %d stored bytes, %q",
				c.name, d.Reason, len(d.Body), d.Compression, c.reason, len(c.stored), c.comp)
		}
		if len(recorded) != 0 {
			t.Errorf("%s: recorded sequence numbers %v read from a compressed body", c.name, recorded)
		}
	}
}
