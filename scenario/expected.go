package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/orderflow/orderflow/fsm"
)

// Expected is what the database must hold once every message of a scenario
// has been consumed. It is written to the expected-state file by the publish
// command and read by the checker.
type Expected struct {
	// Prefix starts every order ID and bad-message token of the run.
	Prefix  string  `json:"prefix"`
	Options Options `json:"options"`
	Topic   string  `json:"topic,omitempty"`
	// Orders is every order with its expected final state.
	Orders []ExpectedOrder `json:"orders"`
	// Keys is every published valid business key with the content hash of
	// its first (original) event.
	Keys []PublishedKey `json:"keys"`
	// Lost is every generated event that was deliberately never published.
	Lost []PublishedKey `json:"lost,omitempty"`
	// Conflicts is every business key published with two contents.
	Conflicts []ExpectedConflict `json:"conflicts,omitempty"`
	// Bad is every bad message published.
	Bad    []BadMessage `json:"bad,omitempty"`
	Counts Counts       `json:"counts"`
}

// ExpectedOrder is one order's expected final state.
type ExpectedOrder struct {
	OrderID     string     `json:"order_id"`
	UserID      int64      `json:"user_id"`
	Status      fsm.Status `json:"status"`
	Version     int64      `json:"version"`
	AmountCents int64      `json:"amount_cents"`
	// Points is the net points the order must end with.
	Points int64 `json:"points"`
	// PurchasePoints is what a purchase row must hold when there is one.
	PurchasePoints int64 `json:"purchase_points"`
	// RefundPossible is true for an order cancelled after a paid event was
	// published: depending on delivery order it ends either with no ledger
	// rows or with a purchase and a refund row that cancel out.
	RefundPossible bool `json:"refund_possible,omitempty"`
}

// PublishedKey is a business key and the content hash it was published with.
type PublishedKey struct {
	OrderID string `json:"order_id"`
	Version int64  `json:"version"`
	Hash    string `json:"hash"`
}

// Key returns the business key.
func (k PublishedKey) Key() fsm.Key { return fsm.Key{OrderID: k.OrderID, Version: k.Version} }

// ExpectedConflict is a business key published with two contents: whichever
// is consumed first is recorded in order_events, the other is parked in
// dead_letters as a conflict.
type ExpectedConflict struct {
	OrderID string    `json:"order_id"`
	Version int64     `json:"version"`
	Hashes  [2]string `json:"hashes"`
}

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
	// Messages is every message sent, duplicates, conflicts and bad ones
	// included.
	Messages int `json:"messages"`
	Orders   int `json:"orders"`
	// Events is the number of distinct valid events published.
	Events     int `json:"events"`
	Duplicates int `json:"duplicates"`
	Reordered  int `json:"reordered_orders"`
	Lost       int `json:"lost"`
	Conflicts  int `json:"conflicts"`
	Bad        int `json:"bad"`
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
	var e Expected
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("scenario: decode expected state %s: %w", path, err)
	}
	if e.Prefix == "" || len(e.Orders) == 0 {
		return nil, fmt.Errorf("scenario: expected state %s has no prefix or no orders", path)
	}
	return &e, nil
}
