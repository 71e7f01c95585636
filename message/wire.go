package message

import (
	"time"

	"github.com/orderflow/orderflow/wire"
)

// The wire types moved to package wire, which every layer imports; these
// names forward to it until the last caller uses wire directly.

// MaxBodySize is wire.MaxBodySize.
const MaxBodySize = wire.MaxBodySize

// MaxReasonLen is wire.MaxReasonLen.
const MaxReasonLen = wire.MaxReasonLen

// Envelope is wire.Envelope.
type Envelope = wire.Envelope

// DeadLetter is wire.DeadLetter.
type DeadLetter = wire.DeadLetter

// Sanitize is wire.Sanitize.
func Sanitize(s string, n int) string { return wire.Sanitize(s, n) }

// NewEnvelope is wire.NewEnvelope.
func NewEnvelope(topic, messageID, keys, tags string, body []byte, storedAt time.Time, inflateRefused bool) Envelope {
	return wire.NewEnvelope(topic, messageID, keys, tags, body, storedAt, inflateRefused)
}
