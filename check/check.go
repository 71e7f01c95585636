// Package check verifies the five invariants of docs/design.md on the database
// after a scenario (package scenario) has been published and consumed.
//
// Verify compares the database with a scenario's expected-state file:
//
//  1. exactly-once effects: one order_events row per business key, at most
//     one points_ledger row per (order, kind), each order's points as the
//     rule gives them, no effect for an order that was never published;
//  2. monotonic state: each order's final status, version and amount are
//     those of the highest-version published event, and the versions its
//     applied events reached it by only increased;
//  3. nothing lost: every published business key has its order_events row
//     (with the published content), every bad message and every conflicting
//     copy is in dead_letters;
//  4. bad input parked, not fatal: every dead letter of the run has a reason
//     of the right kind, and no valid event was parked;
//  5. crash safety: 1–4 hold after whatever the run did to the processes
//     (the checker cannot see the kills; the run that made them can).
//
// A first-phase conflict may be recorded either way round: whichever of the
// two contents was consumed first is in order_events, the other in
// dead_letters; a late conflicting copy must be the one parked.
//
// The checker is an oracle independent of the code it judges: it does not
// import fsm (nor store, message or workflows). It compares the stored
// events' fields with the published ones (no content hash of fsm's), checks
// the outcomes the scenario predicts, and applies the points rule itself
// (rule.go) to the facts the scenario recorded.
package check

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/scenario"
)

// maxDetails is how many failures of one invariant a report lists.
const maxDetails = 10

// Invariant is the verdict on one invariant.
type Invariant struct {
	Number int    `json:"number"`
	Name   string `json:"name"`
	// Failures lists the first failures found; Count counts them all.
	Failures []string `json:"failures,omitempty"`
	Count    int      `json:"count"`
}

// Pass reports whether the invariant held.
func (i *Invariant) Pass() bool { return i.Count == 0 }

func (i *Invariant) fail(format string, args ...any) {
	i.Count++
	if len(i.Failures) < maxDetails {
		i.Failures = append(i.Failures, fmt.Sprintf(format, args...))
	}
}

// Report is the outcome of Verify: what the database holds for the run, and
// the verdict on each invariant.
type Report struct {
	Prefix         string `json:"prefix"`
	ExpectedOrders int    `json:"expected_orders"`
	// OrdersByStatus counts the run's orders rows by status.
	OrdersByStatus map[string]int `json:"orders_by_status"`
	// Points is the sum of the run's points_ledger rows; ExpectedPoints what
	// the rule gives.
	Points         int64 `json:"points"`
	ExpectedPoints int64 `json:"expected_points"`
	LedgerRows     int   `json:"ledger_rows"`
	// EventsByOutcome counts the run's order_events rows by outcome.
	EventsByOutcome map[string]int `json:"events_by_outcome"`
	// Messages is the sum of times_seen over order_events: the distinct
	// messages (broker message IDs) of valid events that reached the
	// database. Duplicates the workflows recognised themselves are not in
	// it (their state query counts them).
	Messages int64 `json:"messages"`
	Gaps     int   `json:"gaps"`
	// DeadLettersByReason counts the run's dead letters by the first word of
	// their reason.
	DeadLettersByReason map[string]int `json:"dead_letters_by_reason"`
	Invariants          []*Invariant   `json:"invariants"`
}

// OK reports whether every invariant held.
func (r *Report) OK() bool {
	for _, i := range r.Invariants {
		if !i.Pass() {
			return false
		}
	}
	return len(r.Invariants) > 0
}

// Failed returns the invariants that did not hold.
func (r *Report) Failed() []*Invariant {
	var out []*Invariant
	for _, i := range r.Invariants {
		if !i.Pass() {
			out = append(out, i)
		}
	}
	return out
}

// Write prints the report as a human-readable summary.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "run %s\n", r.Prefix)
	total := 0
	for _, n := range r.OrdersByStatus {
		total += n
	}
	fmt.Fprintf(w, "  orders:       %d of %d expected; by status: %s\n", total, r.ExpectedOrders, formatCounts(r.OrdersByStatus, statusOrder))
	fmt.Fprintf(w, "  points:       %d (expected %d) in %d ledger rows\n", r.Points, r.ExpectedPoints, r.LedgerRows)
	events := 0
	for _, n := range r.EventsByOutcome {
		events += n
	}
	fmt.Fprintf(w, "  events:       %d business keys, %d messages reached the database, %d applied over a gap; by outcome: %s\n", events, r.Messages, r.Gaps, formatCounts(r.EventsByOutcome, outcomeOrder))
	dl := 0
	for _, n := range r.DeadLettersByReason {
		dl += n
	}
	fmt.Fprintf(w, "  dead letters: %d; by reason: %s\n", dl, formatCounts(r.DeadLettersByReason, nil))
	for _, inv := range r.Invariants {
		verdict := "PASS"
		if !inv.Pass() {
			verdict = fmt.Sprintf("FAIL (%d)", inv.Count)
		}
		fmt.Fprintf(w, "  invariant %d, %-28s %s\n", inv.Number, inv.Name+":", verdict)
		for _, f := range inv.Failures {
			fmt.Fprintf(w, "      - %s\n", f)
		}
		if inv.Count > len(inv.Failures) {
			fmt.Fprintf(w, "      ... and %d more\n", inv.Count-len(inv.Failures))
		}
	}
	if r.OK() {
		fmt.Fprintln(w, "verdict: PASS, all five invariants hold")
	} else {
		fmt.Fprintf(w, "verdict: FAIL, %d invariant(s) violated\n", len(r.Failed()))
	}
}

func formatCounts(m map[string]int, order []string) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	seen := map[string]bool{}
	for _, k := range order {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	keys = append(keys, rest...)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Rows as read from the database.
type orderRow struct {
	id                  string
	user                int64
	status              string
	version, amount     int64
	purchased, refunded bool
	purchasePoints      int64
}

type eventRow struct {
	orderID   string
	version   int64
	content   scenario.Content
	outcome   string
	gap       bool
	timesSeen int64
	firstSeen time.Time
}

type ledgerRow struct {
	orderID string
	kind    string
	points  int64
	user    int64
}

type deadLetterRow struct {
	id        int64
	keys      string
	body      []byte
	reason    string
	timesSeen int64
}

// snapshot is everything the database holds for one run.
type snapshot struct {
	orders      map[string]orderRow
	events      map[scenario.Key][]eventRow
	eventList   []eventRow
	ledger      map[string][]ledgerRow
	deadLetters []deadLetterRow
}

func load(ctx context.Context, gdb *gorm.DB, prefix string) (*snapshot, error) {
	db := gdb.WithContext(ctx)
	s := &snapshot{orders: map[string]orderRow{}, events: map[scenario.Key][]eventRow{}, ledger: map[string][]ledgerRow{}}
	like := prefix + "-"

	rows, err := db.Raw(`SELECT order_id, user_id, status, version, amount_cents, purchased, purchase_points, refunded
		FROM orders WHERE starts_with(order_id, ?)`, like).Rows()
	if err != nil {
		return nil, fmt.Errorf("check: read orders: %w", err)
	}
	for rows.Next() {
		var o orderRow
		if err := rows.Scan(&o.id, &o.user, &o.status, &o.version, &o.amount, &o.purchased, &o.purchasePoints, &o.refunded); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check: read orders: %w", err)
		}
		s.orders[o.id] = o
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("check: read orders: %w", err)
	}

	// The stored content fields, not the stored content hash: the hash is
	// the pipeline's own computation.
	rows, err = db.Raw(`SELECT order_id, version, user_id, status, amount_cents, occurred_at, outcome, gap, times_seen, first_seen_at
		FROM order_events WHERE starts_with(order_id, ?)`, like).Rows()
	if err != nil {
		return nil, fmt.Errorf("check: read order_events: %w", err)
	}
	for rows.Next() {
		var e eventRow
		var status string
		if err := rows.Scan(&e.orderID, &e.version, &e.content.UserID, &status, &e.content.AmountCents, &e.content.OccurredAt,
			&e.outcome, &e.gap, &e.timesSeen, &e.firstSeen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check: read order_events: %w", err)
		}
		e.content.Status = scenario.Status(status)
		k := scenario.Key{OrderID: e.orderID, Version: e.version}
		s.events[k] = append(s.events[k], e)
		s.eventList = append(s.eventList, e)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("check: read order_events: %w", err)
	}

	rows, err = db.Raw(`SELECT order_id, kind, points, user_id FROM points_ledger WHERE starts_with(order_id, ?)`, like).Rows()
	if err != nil {
		return nil, fmt.Errorf("check: read points_ledger: %w", err)
	}
	for rows.Next() {
		var l ledgerRow
		if err := rows.Scan(&l.orderID, &l.kind, &l.points, &l.user); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check: read points_ledger: %w", err)
		}
		s.ledger[l.orderID] = append(s.ledger[l.orderID], l)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("check: read points_ledger: %w", err)
	}

	// A run's dead letters carry its prefix in their keys (bad messages) or
	// in their body (bad messages and conflicting events).
	rows, err = db.Raw(`SELECT id, keys, body, reason, times_seen FROM dead_letters
		WHERE starts_with(keys, ?) OR position(convert_to(?, 'UTF8') IN body) > 0`, like, like).Rows()
	if err != nil {
		return nil, fmt.Errorf("check: read dead_letters: %w", err)
	}
	for rows.Next() {
		var d deadLetterRow
		if err := rows.Scan(&d.id, &d.keys, &d.body, &d.reason, &d.timesSeen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check: read dead_letters: %w", err)
		}
		s.deadLetters = append(s.deadLetters, d)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("check: read dead_letters: %w", err)
	}
	return s, nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// Verify reads the run's rows from db and checks the five invariants against
// exp. The error is only for failing to read the database; violated
// invariants are in the report (see Report.OK).
func Verify(ctx context.Context, db *gorm.DB, exp *scenario.Expected) (*Report, error) {
	if exp == nil || exp.Prefix == "" {
		return nil, fmt.Errorf("check: expected state has no run prefix")
	}
	s, err := load(ctx, db, exp.Prefix)
	if err != nil {
		return nil, err
	}
	return judge(exp, s), nil
}

// sameContent reports whether two events' contents are equal as the
// contract defines it: user_id, status, amount_cents, and occurred_at in UTC
// to the microsecond (the precision PostgreSQL keeps).
func sameContent(a, b scenario.Content) bool {
	return a.UserID == b.UserID && a.Status == b.Status && a.AmountCents == b.AmountCents &&
		a.OccurredAt.UTC().Truncate(time.Microsecond).Equal(b.OccurredAt.UTC().Truncate(time.Microsecond))
}

func describe(c scenario.Content) string {
	return fmt.Sprintf("%s user %d %d¢ at %s", c.Status, c.UserID, c.AmountCents, c.OccurredAt.UTC().Format(time.RFC3339Nano))
}

// checkPoints compares one order's ledger rows with what the points rule
// gives it (PointsDue).
func checkPoints(inv *Invariant, o scenario.ExpectedOrder, d Due, rows []ledgerRow) {
	if d.Problem != "" {
		inv.fail("order %s: the scenario does not determine its points: %s", o.OrderID, d.Problem)
		return
	}
	got := map[string]*ledgerRow{}
	var sum int64
	for i := range rows {
		l := &rows[i]
		sum += l.points
		switch l.kind {
		case KindPurchase, KindRefund:
			got[l.kind] = l
		default:
			inv.fail("order %s has a points_ledger row of unknown kind %q", o.OrderID, l.kind)
		}
	}
	if sum != d.Net() {
		inv.fail("order %s (%s) has %d points, expected %d", o.OrderID, o.Status, sum, d.Net())
	}
	switch {
	case len(d.Rows) == 0:
		if len(rows) > 0 {
			inv.fail("order %s is %s and never paid, but has %d points_ledger rows", o.OrderID, o.Status, len(rows))
		}
		return
	case len(rows) == 0 && d.Optional:
		return // cancelled before any paid event was applied
	}
	purchase, refund := got[KindPurchase], got[KindRefund]
	if refund != nil && purchase != nil && refund.user != purchase.user {
		inv.fail("order %s refund row debits user %d, but user %d earned the purchase", o.OrderID, refund.user, purchase.user)
	}
	dueKinds := map[string]bool{}
	for _, want := range d.Rows {
		dueKinds[want.Kind] = true
		l := got[want.Kind]
		switch {
		case l == nil && d.Optional:
			inv.fail("order %s was cancelled after payment but has a purchase row without a refund or the reverse", o.OrderID)
		case l == nil:
			inv.fail("order %s is %s but has no %s row", o.OrderID, o.Status, want.Kind)
		default:
			if l.points != want.Points {
				inv.fail("order %s %s row has %d points, expected %d", o.OrderID, want.Kind, l.points, want.Points)
			}
			if l.user != want.UserID {
				inv.fail("order %s %s row is on user %d, but the purchaser is user %d", o.OrderID, want.Kind, l.user, want.UserID)
			}
		}
	}
	for _, kind := range []string{KindPurchase, KindRefund} {
		if got[kind] != nil && !dueKinds[kind] {
			inv.fail("order %s is %s but has a %s row", o.OrderID, o.Status, kind)
		}
	}
}

// checkBalances compares each user's net points over the run's ledger rows
// with what the rule gives the user.
func checkBalances(inv *Invariant, want map[int64]int64, ledger map[string][]ledgerRow) {
	got := map[int64]int64{}
	for _, rows := range ledger {
		for _, l := range rows {
			got[l.user] += l.points
		}
	}
	users := map[int64]bool{}
	for u := range want {
		users[u] = true
	}
	for u := range got {
		users[u] = true
	}
	ids := make([]int64, 0, len(users))
	for u := range users {
		ids = append(ids, u)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, u := range ids {
		if got[u] != want[u] {
			inv.fail("user %d holds %d points from the run's orders, the rule gives %d", u, got[u], want[u])
		}
	}
}

// findBad returns the index of the dead letter of bad message b, or -1.
func findBad(dls []deadLetterRow, b scenario.BadMessage) int {
	for i, d := range dls {
		if d.keys == b.Token {
			return i
		}
	}
	for i, d := range dls {
		sum := sha256.Sum256(d.body)
		if hex.EncodeToString(sum[:]) == b.BodySHA256 || strings.Contains(string(d.body), `"`+b.Token+`"`) {
			return i
		}
	}
	return -1
}

func describeBad(b scenario.BadMessage) string {
	if b.Field != "" {
		return b.Kind + " " + b.Field
	}
	return b.Kind
}

// parkedJSON is an event as a parked body carries it: the contract's
// fields, decoded by the checker itself.
type parkedJSON struct {
	OrderID     string    `json:"order_id"`
	Version     int64     `json:"version"`
	UserID      int64     `json:"user_id"`
	Status      string    `json:"status"`
	AmountCents int64     `json:"amount_cents"`
	OccurredAt  time.Time `json:"occurred_at"`
}

func (e parkedJSON) key() scenario.Key { return scenario.Key{OrderID: e.OrderID, Version: e.Version} }

func (e parkedJSON) content() scenario.Content {
	return scenario.Content{UserID: e.UserID, Status: scenario.Status(e.Status), AmountCents: e.AmountCents, OccurredAt: e.OccurredAt}
}

// parkedEvent decodes the body of a dead letter that holds an event: the
// event itself, or an object with it under "event".
func parkedEvent(body []byte) (parkedJSON, bool) {
	var e parkedJSON
	if err := json.Unmarshal(body, &e); err == nil && e.OrderID != "" && e.Version > 0 {
		return e, true
	}
	var wrapped struct {
		Event parkedJSON `json:"event"`
	}
	if err := json.Unmarshal(body, &wrapped); err == nil && wrapped.Event.OrderID != "" && wrapped.Event.Version > 0 {
		return wrapped.Event, true
	}
	return parkedJSON{}, false
}

func reasonHasWord(reason string, words []string) bool {
	if strings.TrimSpace(reason) == "" {
		return false
	}
	lower := strings.ToLower(reason)
	for _, w := range words {
		if strings.Contains(lower, strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// reasonKind is the first word of a reason ("conflict", "malformed_json",
// ...), for the summary.
func reasonKind(reason string) string {
	r := strings.TrimSpace(reason)
	if i := strings.IndexAny(r, ": "); i > 0 {
		r = r[:i]
	}
	if r == "" {
		return "(empty)"
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedEventKeys(m map[scenario.Key][]eventRow) []scenario.Key {
	out := make([]scenario.Key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].OrderID != out[b].OrderID {
			return out[a].OrderID < out[b].OrderID
		}
		return out[a].Version < out[b].Version
	})
	return out
}
