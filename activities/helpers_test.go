package activities_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
)

// recorder counts what the activities report.
type recorder struct {
	mu       sync.Mutex
	outcomes map[fsm.Outcome]int
	points   map[fsm.PointsKind]int64
	rows     map[fsm.PointsKind]int
	toRow    []time.Duration
}

func (r *recorder) ObserveStoreToRow(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.toRow = append(r.toRow, d)
}

func (r *recorder) ObserveOutcome(o fsm.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[o]++
}

func (r *recorder) ObservePoints(k fsm.PointsKind, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.points[k] += n
	r.rows[k]++
}

func (r *recorder) outcome(o fsm.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[o]
}

const testTopic = "ORDER_EVENTS_TEST"

func newActivities(t testing.TB) (*activities.Activities, *recorder) {
	t.Helper()
	db, _ := testenv.NewDatabase(t)
	rec := &recorder{outcomes: map[fsm.Outcome]int{}, points: map[fsm.PointsKind]int64{}, rows: map[fsm.PointsKind]int{}}
	return &activities.Activities{Store: store.New(db), Metrics: rec, Topic: testTopic}, rec
}

var orderSeq atomic.Int64

// orderID returns an order ID unique within the test binary.
func orderID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, orderSeq.Add(1))
}

var base = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func event(orderID string, version int64, status fsm.Status, amount int64) fsm.Event {
	return fsm.Event{
		EventID: fmt.Sprintf("ev-%s-%d", orderID, version), OrderID: orderID, UserID: 42,
		Status: status, Version: version, AmountCents: amount,
		OccurredAt: base.Add(time.Duration(version) * time.Second),
	}
}

func withUser(e fsm.Event, user int64) fsm.Event {
	e.UserID = user
	return e
}

// balances sums an order's points_ledger rows by user.
func balances(t testing.TB, db *gorm.DB, id string) map[int64]int64 {
	t.Helper()
	var rows []struct {
		UserID int64
		Sum    int64
	}
	if err := db.Raw(`SELECT user_id, sum(points) AS sum FROM points_ledger WHERE order_id = ? GROUP BY user_id`, id).
		Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	for _, r := range rows {
		out[r.UserID] = r.Sum
	}
	return out
}

// ledgerUsers maps an order's points_ledger kinds to their user.
func ledgerUsers(t testing.TB, db *gorm.DB, id string) map[string]int64 {
	t.Helper()
	var rows []struct {
		Kind   string
		UserID int64
	}
	if err := db.Raw(`SELECT kind, user_id FROM points_ledger WHERE order_id = ?`, id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Kind] = r.UserID
	}
	return out
}

// deliver does what OrderWorkflow does with one event: ApplyEvent, then
// AwardPoints when the decision moves points.
func deliver(t testing.TB, a *activities.Activities, e fsm.Event) activities.ApplyEventResult {
	t.Helper()
	res, err := deliverErr(context.Background(), a, e)
	if err != nil {
		t.Fatalf("deliver %s %s: %v", e.Key(), e.Status, err)
	}
	return res
}

func deliverErr(ctx context.Context, a *activities.Activities, e fsm.Event) (activities.ApplyEventResult, error) {
	res, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: e})
	if err != nil {
		return res, err
	}
	d := res.Decision
	if d.Outcome == fsm.Applied && d.Points != fsm.PointsNone {
		_, err = a.AwardPoints(ctx, activities.AwardPointsInput{
			OrderID: e.OrderID, UserID: e.UserID, Kind: d.Points, Points: d.PointsDelta, Version: e.Version,
		})
	}
	return res, err
}

type orderRow struct {
	UserID         int64
	Status         string
	Version        int64
	AmountCents    int64
	ContentHash    string
	Purchased      bool
	PurchasePoints int64
	Refunded       bool
	UpdatedAt      time.Time
}

func loadOrderRow(t testing.TB, db *gorm.DB, id string) (orderRow, bool) {
	t.Helper()
	var rows []orderRow
	if err := db.Raw(`SELECT user_id, status, version, amount_cents, content_hash, purchased, purchase_points, refunded, updated_at
		FROM orders WHERE order_id = ?`, id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return orderRow{}, false
	}
	return rows[0], true
}

type eventRow struct {
	Version     int64
	EventID     string
	Status      string
	ContentHash string
	Outcome     string
	Gap         bool
	PointsKind  string
	PointsDelta int64
	Reason      string
	TimesSeen   int
	Conflicts   int
}

func eventRows(t testing.TB, db *gorm.DB, id string) map[int64]eventRow {
	t.Helper()
	var rows []eventRow
	if err := db.Raw(`SELECT version, event_id, status, content_hash, outcome, gap, points_kind, points_delta, reason, times_seen, conflicts
		FROM order_events WHERE order_id = ?`, id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	m := map[int64]eventRow{}
	for _, r := range rows {
		m[r.Version] = r
	}
	return m
}

// ledger returns the points rows of an order by kind.
func ledger(t testing.TB, db *gorm.DB, id string) map[string]int64 {
	t.Helper()
	var rows []struct {
		Kind   string
		Points int64
	}
	if err := db.Raw(`SELECT kind, points FROM points_ledger WHERE order_id = ?`, id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, r := range rows {
		if _, dup := m[r.Kind]; dup {
			t.Fatalf("order %s has two %s rows", id, r.Kind)
		}
		m[r.Kind] = r.Points
	}
	return m
}

// ledgerRow is one points_ledger row.
type ledgerRow struct {
	Points, Version, UserID int64
}

// ledgerRows returns the points rows of an order by kind.
func ledgerRows(t testing.TB, db *gorm.DB, id string) map[string]ledgerRow {
	t.Helper()
	var rows []struct {
		Kind                    string
		Points, Version, UserID int64
	}
	if err := db.Raw(`SELECT kind, points, version, user_id FROM points_ledger WHERE order_id = ?`, id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	m := map[string]ledgerRow{}
	for _, r := range rows {
		if _, dup := m[r.Kind]; dup {
			t.Fatalf("order %s has two %s rows", id, r.Kind)
		}
		m[r.Kind] = ledgerRow{Points: r.Points, Version: r.Version, UserID: r.UserID}
	}
	return m
}

func count(t testing.TB, db *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(`SELECT count(*) FROM ` + table).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// checkInvariants checks docs/design.md's database invariants on every order:
// the points ledger agrees with the flags of the order row; a purchase row
// holds one point per whole 100 cents of the amount of the event it names,
// an event at a paid status; a refund row takes back the purchase at a
// cancelling event; an order's net points follow its status. The points
// are judged from the events' amounts by the rule, written here, not from
// the points the code computed (purchase_points, points_delta).
func checkInvariants(t testing.TB, db *gorm.DB) {
	t.Helper()
	var bad []struct {
		OrderID string
		Problem string
	}
	err := db.Raw(`
		WITH l AS (
			SELECT order_id,
				max(points) FILTER (WHERE kind = 'purchase') AS purchase,
				max(version) FILTER (WHERE kind = 'purchase') AS purchase_version,
				min(points) FILTER (WHERE kind = 'refund') AS refund,
				max(version) FILTER (WHERE kind = 'refund') AS refund_version,
				sum(points) AS net
			FROM points_ledger GROUP BY order_id)
		SELECT o.order_id, CASE
			WHEN o.purchased <> (l.purchase IS NOT NULL) THEN 'purchase row does not match purchased'
			WHEN o.refunded <> (l.refund IS NOT NULL) THEN 'refund row does not match refunded'
			WHEN l.purchase IS NOT NULL AND NOT EXISTS (
				SELECT 1 FROM order_events e WHERE e.order_id = o.order_id AND e.version = l.purchase_version
				AND e.status IN ('PAID','SHIPPED','DELIVERED','COMPLETED') AND l.purchase = e.amount_cents / 100)
				THEN 'the purchase row is not one point per whole 100 cents of a paid event of the order'
			WHEN l.refund IS NOT NULL AND l.refund <> -l.purchase THEN 'refund differs from the purchase'
			WHEN l.refund IS NOT NULL AND NOT EXISTS (
				SELECT 1 FROM order_events e WHERE e.order_id = o.order_id AND e.version = l.refund_version
				AND e.status = 'CANCELLED')
				THEN 'the refund row names no cancelling event of the order'
			WHEN o.status = 'CANCELLED' AND coalesce(l.net, 0) <> 0 THEN 'cancelled order keeps points'
			WHEN o.status = 'CREATED' AND l.order_id IS NOT NULL THEN 'created order with points rows'
			WHEN o.status IN ('PAID','SHIPPED','DELIVERED','COMPLETED') AND l.purchase IS NULL THEN 'paid order without purchase'
			WHEN o.status IN ('PAID','SHIPPED','DELIVERED','COMPLETED') AND l.net <> l.purchase THEN 'paid order nets other than its purchase'
			END AS problem
		FROM orders o LEFT JOIN l USING (order_id)
		WHERE o.order_id IS NOT NULL`).Scan(&bad).Error
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		if b.Problem != "" {
			t.Errorf("order %s: %s", b.OrderID, b.Problem)
		}
	}
	var twice []struct {
		OrderID    string
		PointsKind string
		N          int
	}
	if err := db.Raw(`SELECT order_id, points_kind, count(*) AS n FROM order_events WHERE points_kind <> ''
		GROUP BY order_id, points_kind HAVING count(*) > 1`).Scan(&twice).Error; err != nil {
		t.Fatal(err)
	}
	for _, r := range twice {
		t.Errorf("order %s: %d events decided a %s", r.OrderID, r.N, r.PointsKind)
	}
	var wrongUser []string
	if err := db.Raw(`SELECT r.order_id FROM points_ledger r JOIN points_ledger p
		ON p.order_id = r.order_id AND p.kind = 'purchase' AND r.kind = 'refund' WHERE r.user_id <> p.user_id`).
		Scan(&wrongUser).Error; err != nil {
		t.Fatal(err)
	}
	for _, id := range wrongUser {
		t.Errorf("order %s: the refund row is not on the purchaser", id)
	}
	var orphans int64
	if err := db.Raw(`SELECT count(*) FROM points_ledger l LEFT JOIN orders o USING (order_id) WHERE o.order_id IS NULL`).Scan(&orphans).Error; err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d points rows without an order", orphans)
	}
}

// wantNonRetryable checks err is a non-retryable application error of the
// given type whose message contains every fragment.
func wantNonRetryable(t testing.TB, err error, errType string, fragments ...string) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("want a %s application error, got %v", errType, err)
	}
	if !ae.NonRetryable() || ae.Type() != errType {
		t.Errorf("error %v: type %q non-retryable %v, want %q non-retryable", err, ae.Type(), ae.NonRetryable(), errType)
	}
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("error %v does not wrap store.ErrInvalid", err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not say %q", err, f)
		}
	}
}
