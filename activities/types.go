package activities

import (
	"time"

	"github.com/orderflow/orderflow/fsm"
)

// Activity names, as registered with the worker.
const (
	NameLoadOrder      = "LoadOrder"
	NameApplyEvent     = "ApplyEvent"
	NameAwardPoints    = "AwardPoints"
	NameParkDeadLetter = "ParkDeadLetter"
)

// LoadOrderResult is the stored order, as a fresh workflow run rehydrates it.
type LoadOrderResult struct {
	// Found is false when the order has no row yet.
	Found bool      `json:"found"`
	Order fsm.Order `json:"order"`
	// Versions maps every business key version recorded in order_events
	// to its content hash, so the workflow recognises duplicates.
	Versions map[int64]string `json:"versions"`
}

// ApplyEventInput is one event to apply.
type ApplyEventInput struct {
	Event fsm.Event `json:"event"`
}

// ApplyEventResult is the authoritative decision taken inside the database
// transaction. A repeat of the same business key returns the first outcome.
type ApplyEventResult struct {
	Decision fsm.Decision `json:"decision"`
	// Repeat is true when the business key was already recorded
	// (the order_events row existed; its times-seen count was increased).
	Repeat bool `json:"repeat"`
}

// AwardPointsInput is one points ledger row to insert.
type AwardPointsInput struct {
	OrderID string         `json:"order_id"`
	UserID  int64          `json:"user_id"`
	Kind    fsm.PointsKind `json:"kind"`
	// Points is signed: positive for a purchase, negative for a refund.
	Points int64 `json:"points"`
	// Version is the version of the event that earned the points.
	Version int64 `json:"version"`
}

// AwardPointsResult says whether this call inserted the row (false when a
// previous delivery or retry already had).
type AwardPointsResult struct {
	Inserted bool `json:"inserted"`
}

// DeadLetter is a message that could not be applied, with the reason.
type DeadLetter struct {
	Topic     string    `json:"topic"`
	MessageID string    `json:"message_id"`
	Keys      string    `json:"keys"`
	Tags      string    `json:"tags"`
	Body      []byte    `json:"body"`
	Reason    string    `json:"reason"`
	StoredAt  time.Time `json:"stored_at,omitempty"`
}

// ParkDeadLetterResult says where a dead letter is stored.
type ParkDeadLetterResult struct {
	// ID is the dead_letters row holding the message.
	ID int64 `json:"id"`
	// Fingerprint is the message's DeadLetterFingerprint.
	Fingerprint string `json:"fingerprint"`
	// TimesSeen counts the deliveries of the message, this one included.
	TimesSeen int64 `json:"times_seen"`
	// New is true when this call inserted the row.
	New bool `json:"new"`
}
