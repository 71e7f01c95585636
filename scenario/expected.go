package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Expected is what the database must hold once every message of a scenario
// published so far has been consumed. It is written to the expected-state
// file by the publish command and read by the checker (package check), which
// applies the contract's rules, the points rule among them, to these facts.
//
// Everything in it follows from the paths the generator wrote, not from the
// code under test: an order's final state is its highest published event
// (generated paths only move forward through the lifecycle), and an outcome
// is stated only where delivery order cannot change it.
type Expected struct {
	// Prefix starts every order ID and bad-message token of the run.
	Prefix  string  `json:"prefix"`
	Options Options `json:"options"`
	Topic   string  `json:"topic,omitempty"`
	// Phases is how many phases of the scenario have been published: 1, or
	// 2 once the late phase was (see Scenario.Late). Keys and conflicts of
	// a later phase are not expected yet. 0 reads as 1.
	Phases int `json:"phases"`
	// Orders is every order with its expected final state.
	Orders []ExpectedOrder `json:"orders"`
	// Keys is every valid business key the scenario publishes, in either
	// phase, with the content of its first (original) event.
	Keys []PublishedKey `json:"keys"`
	// Lost is every generated event that is never published.
	Lost []PublishedKey `json:"lost,omitempty"`
	// Holes are the sequence numbers the first phase's producer spent on
	// lost events without sending them, as Publish reported them (the
	// publish command records them): the late phase sends a lost event it
	// publishes with its number, so only the holes of Lost stay open (see
	// OpenHoles).
	Holes []Hole `json:"holes,omitempty"`
	// Conflicts is every business key published with two contents.
	Conflicts []ExpectedConflict `json:"conflicts,omitempty"`
	// Bad is every bad message published.
	Bad    []BadMessage `json:"bad,omitempty"`
	Counts Counts       `json:"counts"`
}

// FirstPhase returns a copy of e that expects only the first phase to have
// been published: what the database holds before the late phase.
func (e *Expected) FirstPhase() *Expected {
	c := *e
	c.Phases = 1
	return &c
}

// Published reports whether the keys and conflicts of phase have been
// published.
func (e *Expected) Published(phase int) bool {
	return max(phase, 1) <= max(e.Phases, 1)
}

// PublishedKeys returns the keys of the phases published so far.
func (e *Expected) PublishedKeys() []PublishedKey {
	var out []PublishedKey
	for _, k := range e.Keys {
		if e.Published(k.Phase) {
			out = append(out, k)
		}
	}
	return out
}

// OpenHoles returns the holes the phases published so far leave open: those
// whose lost event has not been published.
func (e *Expected) OpenHoles() []Hole {
	published := map[Key]bool{}
	for _, k := range e.PublishedKeys() {
		published[k.Key()] = true
	}
	var out []Hole
	for _, h := range e.Holes {
		if !published[h.Key()] {
			out = append(out, h)
		}
	}
	return out
}

// Hole is a sequence number spent on a lost event without sending it: a
// hole consumers find in the producer's sequence until a message with the
// number arrives.
type Hole struct {
	ProducerID string `json:"producer_id"`
	Seq        int64  `json:"seq"`
	// OrderID and Version name the lost event.
	OrderID string `json:"order_id"`
	Version int64  `json:"version"`
}

// Key returns the business key of the lost event.
func (h Hole) Key() Key { return Key{OrderID: h.OrderID, Version: h.Version} }

// ExpectedOrder is one order's expected final state: the snapshot of its
// highest-version event of the first phase. (The late phase never changes
// an order.)
type ExpectedOrder struct {
	OrderID     string `json:"order_id"`
	UserID      int64  `json:"user_id"`
	Status      Status `json:"status"`
	Version     int64  `json:"version"`
	AmountCents int64  `json:"amount_cents"`
}

// PublishedKey is a published business key and the content it was first
// published with.
type PublishedKey struct {
	OrderID string `json:"order_id"`
	Version int64  `json:"version"`
	Content
	// Phase is the phase that publishes the key: 1, or 2 for the late
	// phase. 0 reads as 1.
	Phase int `json:"phase,omitempty"`
	// Outcome is the outcome its order_events row must record when delivery
	// order cannot change it: "applied" for an order's highest version of
	// the first phase, "illegal" for a late event its order's final status
	// cannot reach, "stale" for a lost event that arrives late. Empty for
	// the other keys of the first phase, which are applied or stale
	// depending on the order they arrive in.
	Outcome string `json:"outcome,omitempty"`
}

// Key returns the business key.
func (k PublishedKey) Key() Key { return Key{OrderID: k.OrderID, Version: k.Version} }

// ExpectedConflict is a business key published with two contents. In the
// first phase whichever copy is consumed first is recorded in order_events
// and the other is parked in dead_letters as a conflict; in the late phase
// the original is already recorded, so the copy is parked.
type ExpectedConflict struct {
	OrderID string `json:"order_id"`
	Version int64  `json:"version"`
	// Copy is the content of the conflicting copy; the original's is in
	// Keys.
	Copy Content `json:"copy"`
	// Phase is the phase that publishes the copy (0 reads as 1).
	Phase int `json:"phase,omitempty"`
}

// Key returns the business key.
func (c ExpectedConflict) Key() Key { return Key{OrderID: c.OrderID, Version: c.Version} }

// BadMessage is a published message that breaks the contract.
type BadMessage struct {
	// Token is the message's key, unique per run; it also appears in the
	// body of every kind but one (missing-field without event_id carries it
	// in an extra field).
	Token string `json:"token"`
	Kind  string `json:"kind"`
	// Field is the missing field of a missing-field message.
	Field      string `json:"field,omitempty"`
	BodySHA256 string `json:"body_sha256"`
	Size       int    `json:"size"`
	// ReasonWords: the dead letter's reason must contain one of them.
	ReasonWords []string `json:"reason_words"`
}

// Counts summarises a scenario.
type Counts struct {
	// Messages is every message sent in both phases, duplicates,
	// conflicts and bad ones included; Late is how many of them the late
	// phase sends.
	Messages int `json:"messages"`
	Late     int `json:"late"`
	Orders   int `json:"orders"`
	// Events is the number of distinct valid events published (business
	// keys), illegal ones included.
	Events     int `json:"events"`
	Duplicates int `json:"duplicates"`
	Reordered  int `json:"reordered_orders"`
	Lost       int `json:"lost"`
	Conflicts  int `json:"conflicts"`
	Bad        int `json:"bad"`
	// Illegal is the number of late events their order cannot reach.
	Illegal int `json:"illegal"`
	// UserChanges is the number of orders whose cancellation names another
	// user than the events before it.
	UserChanges int `json:"user_changes"`
}

// WriteFile writes the expected state as indented JSON, atomically.
func (e *Expected) WriteFile(path string) error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("scenario: encode expected state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".expected-*.json")
	if err != nil {
		return fmt.Errorf("scenario: write expected state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("scenario: write expected state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("scenario: write expected state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("scenario: write expected state: %w", err)
	}
	return nil
}

// ReadFile reads an expected-state file written by WriteFile.
func ReadFile(path string) (*Expected, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: read expected state: %w", err)
	}
	return decodeExpected(data, path)
}

// decodeExpected decodes the content of the expected-state file path.
func decodeExpected(data []byte, path string) (*Expected, error) {
	var e Expected
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("scenario: decode expected state %s: %w", path, err)
	}
	if e.Prefix == "" || len(e.Orders) == 0 {
		return nil, fmt.Errorf("scenario: expected state %s has no prefix or no orders", path)
	}
	return &e, nil
}
