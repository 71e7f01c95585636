// Package wire holds what every layer of orderflow carries of a broker
// message: the Envelope (the message as the broker delivered it), the
// DeadLetter (a message parked with its reason) and the rejection kinds its
// reason starts with, and Sanitize, which makes text storable in
// PostgreSQL. It imports nothing of the project: the
// decoder (package message), the bridge, the workflow, the activities and
// the store all use it.
package wire

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxBodySize is the largest message body the contract accepts, in bytes.
const MaxBodySize = 64 * 1024

// Sanitize makes s safe to store as PostgreSQL text: invalid UTF-8 becomes
// U+FFFD, NUL bytes are dropped, and the result is cut to at most n bytes on a
// character boundary (n <= 0 for no limit).
func Sanitize(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if n > 0 && len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// MaxReasonLen is the longest reason a dead letter stores, in bytes.
const MaxReasonLen = 1024

// Envelope is a message as the broker delivered it: where it came from and
// its body, byte for byte. NewEnvelope makes its text fields storable.
type Envelope struct {
	Topic     string `json:"topic"`
	MessageID string `json:"message_id"`
	Keys      string `json:"keys"`
	Tags      string `json:"tags"`
	Body      []byte `json:"body"`
	// StoredAt is when the broker stored the message (not persisted).
	StoredAt time.Time `json:"stored_at,omitzero"`
	// InflateRefused is true when the consumer did not inflate a
	// compressed body because it would exceed MaxBodySize; Body is then
	// the compressed bytes.
	InflateRefused bool `json:"inflate_refused,omitempty"`
	// Compression is the compression Body is still in ("zlib", "lz4",
	// "zstd", or "type N" for a type RocketMQ does not define), set when the
	// consumer left a compressed body as stored: it would inflate past
	// MaxBodySize (InflateRefused) or cannot be decoded (DecodeError). It
	// is "" when Body is as the producer wrote it, plain or inflated by the
	// consumer.
	Compression string `json:"compression,omitempty"`
	// DecodeError is why the consumer could not decode the compressed
	// body (not persisted; a dead letter's reason keeps it).
	DecodeError string `json:"decode_error,omitempty"`
	// Queue is where the broker holds the message: the queue it was
	// consumed from (the retry topic's, for a redelivery) and its offset
	// there. The store records a receipt of it with the message's effect
	// (docs/design.md, recovery points); nil when unknown.
	Queue *QueueOffset `json:"queue,omitempty"`
}

// QueueOffset is a message's place in the broker: a queue, named by its
// topic, broker and ID, and the message's offset in it.
type QueueOffset struct {
	Topic   string `json:"topic"`
	Broker  string `json:"broker"`
	QueueID int    `json:"queue_id"`
	Offset  int64  `json:"offset"`
}

// Valid reports whether q names a queue and an offset that can be
// recorded.
func (q QueueOffset) Valid() bool {
	return q.Topic != "" && q.Broker != "" && q.QueueID >= 0 && q.Offset >= 0
}

// StillCompressed reports whether Body is still compressed, as stored,
// rather than as the producer wrote it.
func (e Envelope) StillCompressed() bool { return e.InflateRefused || e.Compression != "" }

// maxEnvelopeText bounds each text field of an Envelope.
const maxEnvelopeText = 1024

// NewEnvelope returns the envelope of a message, its text fields made
// storable (Sanitize, at most 1024 bytes each) and its body kept as is.
func NewEnvelope(topic, messageID, keys, tags string, body []byte, storedAt time.Time, inflateRefused bool) Envelope {
	if body == nil {
		body = []byte{}
	}
	return Envelope{
		Topic:          Sanitize(topic, maxEnvelopeText),
		MessageID:      Sanitize(messageID, maxEnvelopeText),
		Keys:           Sanitize(keys, maxEnvelopeText),
		Tags:           Sanitize(tags, maxEnvelopeText),
		Body:           body,
		StoredAt:       storedAt,
		InflateRefused: inflateRefused,
	}
}

// DeadLetter is a message that cannot be applied, as received, with the
// reason.
type DeadLetter struct {
	Envelope
	Reason string `json:"reason"`
}

// Rejection kinds: the first word of the reason of a dead letter the
// decoder or the bridge parks, stable, and usable as a metrics label.
const (
	// KindOversize: the body is larger than MaxBodySize.
	KindOversize = "oversize"
	// KindMalformedJSON: the body is empty or is not valid JSON.
	KindMalformedJSON = "malformed_json"
	// KindNotObject: the body is valid JSON but not an object.
	KindNotObject = "not_object"
	// KindMissingField: a required field is absent or null.
	KindMissingField = "missing_field"
	// KindInvalidField: a field has the wrong type or breaks a rule of the
	// contract.
	KindInvalidField = "invalid_field"
	// KindUndecodable: the body is compressed (the message's system flag
	// says so) and cannot be decoded: a compression this bridge does not
	// know, or corrupt or truncated data. The reason names the compression;
	// the dead letter keeps the body as stored, so that a later version
	// can replay it.
	KindUndecodable = "undecodable"
	// KindUndeliverable: a valid event the engine refuses for good (it
	// cannot be encoded, Temporal answers InvalidArgument, it exceeds the
	// engine's size limits), or one the bridge failed to deliver for longer
	// than its bound. The reason carries the last error.
	KindUndeliverable = "undeliverable"
)

// Kinds lists every rejection kind.
var Kinds = []string{KindOversize, KindMalformedJSON, KindNotObject, KindMissingField, KindInvalidField,
	KindUndecodable, KindUndeliverable}

// InflateRefusedReason is the reason of a dead letter whose compressed body
// the consumer refused to inflate, as it would exceed MaxBodySize:
// "oversize: compressed body inflates past 65536 bytes". A parked message
// with this reason kept its body as stored, still compressed.
func InflateRefusedReason() string {
	return KindOversize + ": compressed body inflates past " + strconv.Itoa(MaxBodySize) + " bytes"
}
