package bridge

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/wire"
)

// frame encodes one message as the broker returns it in a pull result, the
// wire format primitive.DecodeMessage reads: body stored as given, marked
// compressed when compressed is true.
func frame(body []byte, compressed bool) []byte {
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.BigEndian, v) }
	sysFlag := int32(0)
	if compressed {
		sysFlag = primitive.FlagCompressed
	}
	topic := "ORDER_EVENTS"
	props := "KEYS\x01o-1\x02TAGS\x01PAID\x02UNIQ_KEY\x01MSG1\x02"
	w(int32(0))                   // total size (not checked)
	w(int32(0))                   // magic code
	w(int32(0))                   // body CRC
	w(int32(3))                   // queue ID
	w(int32(0))                   // flag
	w(int64(7))                   // queue offset
	w(int64(1234))                // commit log offset
	w(sysFlag)                    // sys flag
	w(int64(1_700_000_000_000))   // born timestamp
	b.Write([]byte{127, 0, 0, 1}) // born host
	w(int32(5000))
	w(int64(1_700_000_000_500))   // store timestamp
	b.Write([]byte{127, 0, 0, 1}) // store host
	w(int32(10911))
	w(int32(0)) // reconsume times
	w(int64(0)) // prepared transaction offset
	w(int32(len(body)))
	b.Write(body)
	b.WriteByte(byte(len(topic)))
	b.WriteString(topic)
	w(int16(len(props)))
	b.WriteString(props)
	return b.Bytes()
}

func zlibOf(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&out, zlib.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

// FuzzReceive drives the whole receive path — the client's decoding of a
// pull result (inflating compressed bodies, bounded), the envelope, and
// message.Parse — with any body, stored plain or compressed. Nothing may
// panic; no body may inflate past the contract's bound; every message is
// either a valid event or a rejection with a storable reason, a body the
// client refused to inflate is rejected as oversize, and one it could not
// decode as undecodable, both kept as received.
func FuzzReceive(f *testing.F) {
	primitive.SetInflateLimit(wire.MaxBodySize)
	valid := []byte(`{"event_id":"e","order_id":"o-1","user_id":1,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z"}`)
	for _, c := range []struct {
		body       []byte
		compressed bool
	}{
		{valid, false},
		{zlibOf(valid), true},
		{valid, true}, // marked compressed, is not: undecodable, kept as is
		{zlibOf(bytes.Repeat([]byte{0}, 10<<20)), true}, // a bomb: 10 MiB of zeros
		{zlibOf(bytes.Repeat([]byte("a"), wire.MaxBodySize+1)), true},
		{zlibOf(bytes.Repeat([]byte("a"), wire.MaxBodySize)), true},
		{bytes.Repeat([]byte("x"), wire.MaxBodySize+1), false},
		{zlibOf(valid)[:10], true}, // truncated stream
		{[]byte{}, false},
		{[]byte{}, true},
	} {
		f.Add(c.body, c.compressed)
	}
	f.Fuzz(func(t *testing.T, body []byte, compressed bool) {
		msgs := primitive.DecodeMessage(frame(body, compressed))
		if len(msgs) != 1 {
			t.Fatalf("decoded %d messages from one frame", len(msgs))
		}
		m := msgs[0]
		env := envelope(m)
		if compressed && env.InflateRefused && !bytes.Equal(m.Body, body) {
			t.Fatalf("a body refused inflation must stay as received")
		}
		if len(m.Body) > wire.MaxBodySize && compressed && !bytes.Equal(m.Body, body) {
			t.Fatalf("a compressed body inflated to %d bytes, past %d", len(m.Body), wire.MaxBodySize)
		}
		r := message.Parse(env)
		if (r.Rejection == nil) == (r.Event.OrderID == "") {
			t.Fatalf("want exactly one of an event or a rejection: %+v", r)
		}
		if r.Rejection != nil {
			reason := r.Rejection.Reason
			if reason == "" || len(reason) > wire.MaxReasonLen || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) ||
				r.DeadLetter.Reason != reason || !bytes.Equal(r.DeadLetter.Body, m.Body) {
				t.Fatalf("bad rejection %q / dead letter %+v", reason, r.DeadLetter)
			}
			if env.InflateRefused && r.Rejection.Kind != wire.KindOversize {
				t.Fatalf("a body refused inflation was rejected as %s", r.Rejection.Kind)
			}
			if !env.InflateRefused && env.Compression != "" && (r.Rejection.Kind != wire.KindUndecodable ||
				!bytes.Equal(m.Body, body)) {
				t.Fatalf("a body the client could not decode was rejected as %s, or changed", r.Rejection.Kind)
			}
			return
		}
		if err := r.Event.Validate(); err != nil {
			t.Fatalf("accepted event fails Validate: %v", err)
		}
	})
}
