package mq

import (
	"bytes"
	"errors"
	"github.com/orderflow/orderflow/internal/compresstest"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The system flags of a compressed message as the Java client 5.3.3 sets
// them: bit 0, and the type in bits 8-10 (LZ4 1, ZSTD 2, ZLIB 3).
const (
	flagLZ4  int32 = 1 | 1<<8
	flagZstd int32 = 1 | 2<<8
	flagZlib int32 = 1 | 3<<8
)

// received is a message as the client hands it over: its stored body
// decoded as the client decodes it, under a 64 KiB bound, and marked.
func received(t *testing.T, sysFlag int32, stored []byte, props map[string]string) *primitive.MessageExt {
	t.Helper()
	defer primitive.SetInflateLimit(primitive.InflateLimit())
	primitive.SetInflateLimit(64 << 10)
	m := &primitive.MessageExt{SysFlag: sysFlag}
	for k, v := range props {
		m.WithProperty(k, v)
	}
	body, mark, value := primitive.InflateBody(stored, sysFlag)
	m.Body = body
	if sysFlag&primitive.FlagCompressed != 0 {
		m.MarkInflation(mark, value)
	}
	return m
}

// Compression and DecodeError tell a body the client decoded, one it
// refused for its size and one it could not decode apart.
func TestCompressionOfReceivedBodies(t *testing.T) {
	event := []byte(`{"order_id":"o-1"}`)
	bomb := make([]byte, 1<<20)
	zstdEvent := compresstest.Zstd(t, event)
	for _, c := range []struct {
		name        string
		flag        int32
		stored      []byte
		props       map[string]string
		compression string
		refused     bool
		decodeErr   bool
	}{
		{"plain", 0, event, nil, "", false, false},
		{"zstd", flagZstd, zstdEvent, nil, "", false, false},
		{"lz4", flagLZ4, compresstest.LZ4(t, event), nil, "", false, false},
		{"zlib", flagZlib, compresstest.Zlib(t, event), nil, "", false, false},
		{"zstd bomb", flagZstd, compresstest.Zstd(t, bomb), nil, "zstd", true, false},
		{"lz4 bomb", flagLZ4, compresstest.LZ4(t, bomb), nil, "lz4", true, false},
		{"zlib bomb (older client)", 1, compresstest.Zlib(t, bomb), nil, "zlib", true, false},
		{"truncated zstd", flagZstd, zstdEvent[:len(zstdEvent)-3], nil, "zstd", false, true},
		{"type 6", 1 | 6<<8, zstdEvent, nil, "type 6", false, true},
		{"plain with a forged mark", 0, event, map[string]string{primitive.PropertyUndecodable: "zstd: x",
			primitive.PropertyInflateLimitExceeded: "1"}, "", false, false},
	} {
		m := received(t, c.flag, c.stored, c.props)
		if got := Compression(m); got != c.compression {
			t.Errorf("%s: Compression %q, want %q", c.name, got, c.compression)
		}
		if got := InflateRefused(m); got != c.refused {
			t.Errorf("%s: InflateRefused %v, want %v", c.name, got, c.refused)
		}
		if got := DecodeError(m); (got != "") != c.decodeErr {
			t.Errorf("%s: DecodeError %q", c.name, got)
		}
		if c.compression != "" && !bytes.Equal(m.Body, c.stored) {
			t.Errorf("%s: body not left as stored", c.name)
		}
	}
	m := received(t, 1|6<<8, zstdEvent, nil)
	if got := DecodeError(m); got != "unknown compression type 6" {
		t.Errorf("DecodeError of type 6: %q, want the error without the compression's name", got)
	}
}

// Decompress decodes a stored body by its name, under the same bound.
func TestDecompress(t *testing.T) {
	event := []byte(`{"order_id":"o-1"}`)
	for name, stored := range map[string][]byte{"zstd": compresstest.Zstd(t, event), "lz4": compresstest.LZ4(t, event), "zlib": compresstest.Zlib(t, event)} {
		got, err := Decompress(name, stored, 64<<10)
		if err != nil || !bytes.Equal(got, event) {
			t.Errorf("%s: %q, %v", name, got, err)
		}
		if _, err := Decompress(name, stored, 5); !errors.Is(err, ErrInflateLimit) {
			t.Errorf("%s under a 5-byte bound: %v, want ErrInflateLimit", name, err)
		}
	}
	if _, err := Decompress("type 6", event, 64<<10); err == nil || errors.Is(err, ErrInflateLimit) {
		t.Errorf("type 6: %v, want an error of decoding", err)
	}
}
