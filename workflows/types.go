package workflows

import (
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

// Params tune OrderWorkflow. The bridge passes them when it starts a run; a
// continued run inherits them.
type Params struct {
	// GracePeriod is how long a COMPLETED or CANCELLED order's workflow
	// waits for late events before it completes.
	GracePeriod time.Duration `json:"grace_period"`
	// IdleTimeout is how long a non-terminal order's workflow waits without
	// any event before it completes. A later event starts a fresh run,
	// which rehydrates from PostgreSQL.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// MaxEventsPerRun, when > 0, makes the workflow continue-as-new after
	// handling that many events in one run (an order-events signal counts
	// its events). With 0 it continues-as-new only when Temporal suggests
	// it.
	MaxEventsPerRun int `json:"max_events_per_run"`
}

// Defaults of Params.
const (
	DefaultGracePeriod = 5 * time.Minute
	DefaultIdleTimeout = 24 * time.Hour
)

// DefaultParams returns the production defaults: a 5 minute grace period,
// a 24 hour idle timeout and continue-as-new when Temporal suggests it.
func DefaultParams() Params {
	return Params{GracePeriod: DefaultGracePeriod, IdleTimeout: DefaultIdleTimeout}
}

// withDefaults replaces unset (zero or negative) durations by the defaults.
func (p Params) withDefaults() Params {
	if p.GracePeriod <= 0 {
		p.GracePeriod = DefaultGracePeriod
	}
	if p.IdleTimeout <= 0 {
		p.IdleTimeout = DefaultIdleTimeout
	}
	if p.MaxEventsPerRun < 0 {
		p.MaxEventsPerRun = 0
	}
	return p
}

// Delivery is the payload of the order-event signal: the event and, when
// the bridge delivered it, the message that carried it, as received, so a
// conflicting event is parked raw. Its JSON is the event's fields plus
// "source": a signal of a bare event (as older bridges sent) decodes too.
type Delivery struct {
	fsm.Event
	Source *wire.Envelope `json:"source,omitempty"`
}

// Batch is the payload of the order-events signal: several deliveries of
// one order's events, in the order the bridge received them, which the
// workflow handles one after the other as if each had come in a signal of
// its own.
type Batch struct {
	Deliveries []Delivery `json:"deliveries"`
}

// Input is OrderWorkflow's argument.
type Input struct {
	Params Params `json:"params"`
	// Carry is the state handed over by continue-as-new; nil for a fresh
	// run, which rehydrates the order from PostgreSQL.
	Carry *State `json:"carry,omitempty"`
	// Pending are the events the previous run received but did not
	// handle, in the order it received them (an order-events signal's
	// events in the signal's order): the run handles them first, before
	// any signal of its own. Empty for a fresh run and for a run continued
	// by a workflow version that handled every signal before continuing
	// as new.
	Pending []Delivery `json:"pending,omitempty"`
	// TaskBound, when > 0, is the number of events the run's first
	// workflow task handles at most while more are pending: signals were
	// coming as the previous run continued as new, and this is the bound
	// it had come to for the rate they came at (see
	// ChangeCarryPendingSignals).
	TaskBound int `json:"task_bound,omitempty"`
}

// State is what OrderWorkflow knows about its order; the "state" query
// returns it.
type State struct {
	OrderID string `json:"order_id"`
	// Exists is false until the order has a row (an event was applied or
	// the order was loaded).
	Exists bool      `json:"exists"`
	Order  fsm.Order `json:"order"`
	// Recorded maps every business key version recorded in order_events
	// to its content hash.
	Recorded map[int64]string `json:"recorded"`
	// Counts counts the signals handled per outcome since the workflow was
	// first started (carried across continue-as-new, not across a fresh run
	// after the workflow closed). Duplicates are those it skipped itself.
	Counts map[fsm.Outcome]int64 `json:"counts"`
	// Failed counts events that could not be applied because the input
	// was invalid (a non-retryable activity failure or a signal that breaks
	// the message contract).
	Failed int64 `json:"failed"`
	// Points is the order's net points: purchase points minus refunds.
	Points int64 `json:"points"`
	// PurchaseAwarded and RefundAwarded are true once this chain of runs
	// has had AwardPoints confirm the order's purchase or refund row.
	PurchaseAwarded bool `json:"purchase_awarded"`
	RefundAwarded   bool `json:"refund_awarded"`
	// Gaps counts events applied over at least one missing version.
	Gaps int64 `json:"gaps"`
	// Processed counts the events handled in the current run, those
	// carried over from the previous run included.
	Processed int `json:"processed"`
	// Carried counts the events the previous run handed over unhandled
	// (Input.Pending) when it continued as new.
	Carried int `json:"carried"`
	// Resyncs counts the times this chain of runs found the database
	// behind what it had handled and reloaded the order from it.
	Resyncs int `json:"resyncs,omitempty"`
	// Runs counts the runs of this chain: 1 for a fresh run, +1 for each
	// continue-as-new.
	Runs int `json:"runs"`
	// LastEventAt is the workflow time of the last handled signal, and
	// TerminalAt when the order was first seen COMPLETED or CANCELLED by
	// this chain of runs (zero before).
	LastEventAt time.Time `json:"last_event_at"`
	TerminalAt  time.Time `json:"terminal_at"`
}

// awarded reports whether this chain of runs has confirmed the order's
// ledger row of kind.
func (s State) awarded(kind fsm.PointsKind) bool {
	switch kind {
	case fsm.Purchase:
		return s.PurchaseAwarded
	case fsm.Refund:
		return s.RefundAwarded
	}
	return false
}

// setAwarded records that the order's ledger row of kind is in place.
func (s *State) setAwarded(kind fsm.PointsKind) {
	switch kind {
	case fsm.Purchase:
		s.PurchaseAwarded = true
	case fsm.Refund:
		s.RefundAwarded = true
	}
}

// Status is the order's status, or "" when it does not exist yet.
func (s State) Status() fsm.Status {
	if !s.Exists {
		return ""
	}
	return s.Order.Status
}

// Count returns the number of handled signals with outcome o.
func (s State) Count(o fsm.Outcome) int64 { return s.Counts[o] }

// Result is OrderWorkflow's result when it completes.
type Result struct {
	State State `json:"state"`
	// Reason says why the workflow completed: "grace-period" or
	// "idle-timeout".
	Reason string `json:"reason"`
}

// Completion reasons of Result.
const (
	ReasonGracePeriod = "grace-period"
	ReasonIdleTimeout = "idle-timeout"
)
