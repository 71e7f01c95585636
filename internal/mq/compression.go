package mq

import (
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Compressed bodies. The client decodes a compressed body (zlib, LZ4 or
// zstd, as the message's system flag names it) before the handler runs,
// bounded by ConsumerConfig.MaxInflatedBody. A body it leaves as stored is
// either one that would inflate past the bound (InflateRefused) or one it
// cannot decode (DecodeError); Compression names the compression of both.

// ErrInflateLimit is returned by Decompress for a body that would inflate
// past the limit.
var ErrInflateLimit = primitive.ErrInflateLimitExceeded

// Compression is the compression m's body is still in, as the system flag
// names it ("zlib", "lz4", "zstd", or "type N" for a type RocketMQ does not
// define) when the client left the body as stored: it would inflate past
// the bound (InflateRefused) or cannot be decoded (DecodeError). It is ""
// when m.Body is as the producer wrote it: plain, or inflated by the client.
func Compression(m *primitive.MessageExt) string {
	if InflateRefused(m) || undecodable(m) != "" {
		return primitive.CompressionOf(m.SysFlag)
	}
	return ""
}

// DecodeError is why the client could not decode m's compressed body (the
// decoder's error: corrupt or truncated data, an unknown compression type),
// or "" when it decoded it, refused it for its size, or it was not
// compressed.
func DecodeError(m *primitive.MessageExt) string {
	v := undecodable(m)
	if v == "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(v, primitive.CompressionOf(m.SysFlag)+": "); ok && rest != "" {
		return rest
	}
	return v
}

// undecodable is the client's mark on a compressed body it could not
// decode: the compression and the error.
func undecodable(m *primitive.MessageExt) string {
	if m.SysFlag&primitive.FlagCompressed == 0 {
		return ""
	}
	return m.GetProperty(primitive.PropertyUndecodable)
}

// Decompress decodes a body stored in the named compression (as
// Compression names it), inflating at most limit bytes (0: no bound): it
// returns ErrInflateLimit when the body would inflate further, and another
// error when it cannot be decoded. It is what the client does to a
// compressed body it receives, for bodies decoded later (`orderflow dlq
// replay` on dead letters).
func Decompress(compression string, body []byte, limit int64) ([]byte, error) {
	return primitive.Decompress(compression, body, limit)
}
