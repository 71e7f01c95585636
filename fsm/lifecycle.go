// Package fsm holds the order lifecycle of orderflow and the pure decision
// function that judges an order event against the stored order.
//
// Nothing in this package performs I/O, reads the clock or uses randomness, so
// it is safe to call from Temporal workflow code as well as from activities.
package fsm

import (
	"context"
	"fmt"
	"sort"

	lfsm "github.com/looplab/fsm"
)

// Status is an order's lifecycle state.
type Status string

// The lifecycle states. COMPLETED and CANCELLED are terminal.
const (
	Created   Status = "CREATED"
	Paid      Status = "PAID"
	Shipped   Status = "SHIPPED"
	Delivered Status = "DELIVERED"
	Completed Status = "COMPLETED"
	Cancelled Status = "CANCELLED"
)

// Statuses lists every lifecycle state in lifecycle order.
var Statuses = []Status{Created, Paid, Shipped, Delivered, Completed, Cancelled}

// Lifecycle transition names, as registered with looplab/fsm.
const (
	EventPay      = "pay"
	EventShip     = "ship"
	EventDeliver  = "deliver"
	EventComplete = "complete"
	EventCancel   = "cancel"
)

// transitions is the lifecycle of docs/design.md:
//
//	CREATED ──► PAID ──► SHIPPED ──► DELIVERED ──► COMPLETED
//	   │          │
//	   └──────────┴──► CANCELLED
var transitions = lfsm.Events{
	{Name: EventPay, Src: []string{string(Created)}, Dst: string(Paid)},
	{Name: EventShip, Src: []string{string(Paid)}, Dst: string(Shipped)},
	{Name: EventDeliver, Src: []string{string(Shipped)}, Dst: string(Delivered)},
	{Name: EventComplete, Src: []string{string(Delivered)}, Dst: string(Completed)},
	{Name: EventCancel, Src: []string{string(Created), string(Paid)}, Dst: string(Cancelled)},
}

// reachable[from][to] is true when `to` can be reached from `from` in zero or
// more lifecycle steps. It is computed once from the looplab/fsm definition.
var reachable = buildReachability()

// NewMachine returns a looplab/fsm state machine for one order, positioned at
// the given status.
func NewMachine(at Status) *lfsm.FSM {
	return lfsm.NewFSM(string(at), transitions, nil)
}

func buildReachability() map[Status]map[Status]bool {
	r := make(map[Status]map[Status]bool, len(Statuses))
	for _, from := range Statuses {
		seen := map[Status]bool{from: true}
		queue := []Status{from}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, next := range nextStatuses(cur) {
				if !seen[next] {
					seen[next] = true
					queue = append(queue, next)
				}
			}
		}
		r[from] = seen
	}
	return r
}

// nextStatuses returns the statuses one transition away from s, asking
// looplab/fsm which transitions it allows there.
func nextStatuses(s Status) []Status {
	var out []Status
	names := NewMachine(s).AvailableTransitions()
	sort.Strings(names)
	for _, name := range names {
		m := NewMachine(s)
		if err := m.Event(context.Background(), name); err != nil {
			panic(fmt.Sprintf("fsm: transition %q from %s: %v", name, s, err))
		}
		out = append(out, Status(m.Current()))
	}
	return out
}

// Valid reports whether s is one of the lifecycle states.
func (s Status) Valid() bool {
	_, ok := reachable[s]
	return ok
}

// Terminal reports whether no other state can follow s.
func (s Status) Terminal() bool {
	return s == Completed || s == Cancelled
}

// CanReach reports whether `to` follows `from` in zero or more lifecycle
// steps. Zero steps (the same status) is a data update and allowed.
func CanReach(from, to Status) bool {
	return reachable[from][to]
}

// EarnsPurchase reports whether an order applied at s has been paid for:
// PAID, SHIPPED, DELIVERED and COMPLETED earn purchase points.
func (s Status) EarnsPurchase() bool {
	switch s {
	case Paid, Shipped, Delivered, Completed:
		return true
	}
	return false
}
