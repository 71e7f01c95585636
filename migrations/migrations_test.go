package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/migrations"
)

func sqlDB(t *testing.T, migrated bool) *sql.DB {
	t.Helper()
	var db interface{ DB() (*sql.DB, error) }
	if migrated {
		g, _ := testenv.NewDatabase(t)
		db = g
	} else {
		g, _ := testenv.NewEmptyDatabase(t)
		db = g
	}
	s, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// schema describes every column and constraint of the public schema, so two
// snapshots can be compared.
func schema(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`
		SELECT table_name || '.' || column_name || ':' || data_type
		FROM information_schema.columns WHERE table_schema = 'public'
		UNION ALL
		SELECT conrelid::regclass::text || '#' || conname FROM pg_constraint
		WHERE connamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname = 'public'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func gooseVersions(t *testing.T, db *sql.DB) []int64 {
	t.Helper()
	rows, err := db.Query(`SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func TestUpCreatesTables(t *testing.T) {
	db := sqlDB(t, false)
	ctx := context.Background()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("Up: %v", err)
	}
	for _, table := range []string{"orders", "order_events", "points_ledger", "dead_letters"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema='public' AND table_name=$1`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s missing after Up", table)
		}
	}
}

func TestUpTwiceIsNoop(t *testing.T) {
	db := sqlDB(t, false)
	ctx := context.Background()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("first Up: %v", err)
	}
	before, versions := schema(t, db), gooseVersions(t, db)
	if len(versions) < 2 { // goose records version 0 plus each migration
		t.Fatalf("goose recorded %v after Up", versions)
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if after := schema(t, db); after != before {
		t.Errorf("schema changed on the second Up:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := gooseVersions(t, db); len(got) != len(versions) {
		t.Errorf("goose versions %v after second Up, want %v", got, versions)
	}
}

func TestApplyReportsWhatItDid(t *testing.T) {
	db := sqlDB(t, false)
	ctx := context.Background()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	res, err := migrations.Apply(ctx, db)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !slices.Equal(res.Applied, files) {
		t.Errorf("Apply on an empty database applied %v, want %v", res.Applied, files)
	}
	last, err := strconv.ParseInt(strings.SplitN(files[len(files)-1], "_", 2)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != last {
		t.Errorf("version after Apply = %d, want %d", res.Version, last)
	}
	again, err := migrations.Apply(ctx, db)
	if err != nil || len(again.Applied) != 0 || again.Version != last {
		t.Errorf("second Apply = %+v, %v; want nothing applied, version %d", again, err, last)
	}
}

func TestConcurrentUpIsSafe(t *testing.T) {
	db := sqlDB(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = migrations.Up(ctx, db)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Up #%d: %v", i, err)
		}
	}
	var applied int
	if err := db.QueryRow(`SELECT count(*) FROM goose_db_version WHERE version_id = 1`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != 1 {
		t.Errorf("migration 1 recorded %d times, want 1", applied)
	}
}

func TestFingerprintIsStable(t *testing.T) {
	a, err := migrations.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := migrations.Fingerprint()
	if a != b || len(a) != 64 {
		t.Errorf("Fingerprint = %q then %q", a, b)
	}
}

const hash = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestConstraintsRejectBadRows inserts one bad row per constraint and checks
// PostgreSQL refuses it with the expected SQLSTATE.
func TestConstraintsRejectBadRows(t *testing.T) {
	db := sqlDB(t, true)
	mustExec(t, db, `INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, purchased, purchase_points, purchase_user_id)
		VALUES ('o-1', 1, 'PAID', 2, 1000, $1, true, 10, 1)`, hash)
	mustExec(t, db, `INSERT INTO order_events (order_id, version, event_id, user_id, status, amount_cents, content_hash, outcome, points_kind, points_delta, occurred_at)
		VALUES ('o-1', 2, 'e', 1, 'PAID', 1000, $1, 'applied', 'purchase', 10, now())`, hash)
	mustExec(t, db, `INSERT INTO points_ledger (order_id, user_id, kind, points, version) VALUES ('o-1', 1, 'purchase', 10, 2)`)

	const (
		check  = "23514"
		unique = "23505"
		fk     = "23503"
		null   = "23502"
	)
	order := func(id, status string, user, version, amount int64, h string) stmt {
		return stmt{`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash) VALUES ($1, $2, $3, $4, $5, $6)`,
			[]any{id, user, status, version, amount, h}}
	}
	event := func(id string, version int64, status, outcome, kind string, delta int64) stmt {
		return stmt{`INSERT INTO order_events (order_id, version, event_id, user_id, status, amount_cents, content_hash, outcome, points_kind, points_delta, occurred_at)
			VALUES ($1, $2, 'e', 1, $3, 0, $4, $5, $6, $7, now())`,
			[]any{id, version, status, hash, outcome, kind, delta}}
	}
	points := func(id, kind string, pts, version int64) stmt {
		return stmt{`INSERT INTO points_ledger (order_id, user_id, kind, points, version) VALUES ($1, 1, $2, $3, $4)`,
			[]any{id, kind, pts, version}}
	}
	dead := func(fp, reason string) stmt {
		return stmt{`INSERT INTO dead_letters (fingerprint, body, reason) VALUES ($1, '\x00', $2)`, []any{fp, reason}}
	}
	type bad struct {
		name  string
		sql   string
		args  []any
		state string
	}
	with := func(name, state string, s stmt) bad { return bad{name, s.sql, s.args, state} }
	cases := []bad{
		with("order unknown status", check, order("o-2", "LOST", 1, 1, 0, hash)),
		with("order version 0", check, order("o-2", "CREATED", 1, 0, 0, hash)),
		with("order user 0", check, order("o-2", "CREATED", 0, 1, 0, hash)),
		with("order negative amount", check, order("o-2", "CREATED", 1, 1, -1, hash)),
		with("order id with space", check, order("o 2", "CREATED", 1, 1, 0, hash)),
		with("order id empty", check, order("", "CREATED", 1, 1, 0, hash)),
		with("order id 65 chars", check, order(strings.Repeat("x", 65), "CREATED", 1, 1, 0, hash)),
		with("order bad hash", check, order("o-2", "CREATED", 1, 1, 0, "nothex")),
		with("order duplicate id", unique, order("o-1", "CREATED", 1, 1, 0, hash)),
		with("order refunded without purchase", check, stmt{`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, refunded) VALUES ('o-3', 1, 'CANCELLED', 1, 0, $1, true)`, []any{hash}}),
		with("order purchased without purchaser", check, stmt{`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, purchased, purchase_points) VALUES ('o-4', 1, 'PAID', 1, 100, $1, true, 1)`, []any{hash}}),
		with("order purchaser 0", check, stmt{`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, purchased, purchase_points, purchase_user_id) VALUES ('o-4', 1, 'PAID', 1, 100, $1, true, 1, 0)`, []any{hash}}),
		with("event unknown outcome", check, event("o-1", 3, "PAID", "maybe", "", 0)),
		with("event version 0", check, event("o-1", 0, "PAID", "stale", "", 0)),
		with("event duplicate key", unique, event("o-1", 2, "PAID", "stale", "", 0)),
		with("event unknown order", fk, event("o-9", 1, "PAID", "applied", "", 0)),
		with("event purchase negative", check, event("o-1", 3, "PAID", "applied", "purchase", -1)),
		with("event refund positive", check, event("o-1", 3, "CANCELLED", "applied", "refund", 1)),
		with("event points when stale", check, event("o-1", 1, "PAID", "stale", "purchase", 1)),
		with("event unknown points kind", check, event("o-1", 3, "PAID", "applied", "bonus", 1)),
		with("points unknown kind", check, points("o-1", "bonus", 1, 2)),
		with("points negative purchase", check, points("o-1", "purchase", -1, 2)),
		with("points positive refund", check, points("o-1", "refund", 1, 2)),
		with("points second purchase", unique, points("o-1", "purchase", 10, 3)),
		with("points unknown order", fk, points("o-9", "purchase", 1, 1)),
		with("points version 0", check, points("o-1", "refund", -10, 0)),
		with("dead letter empty reason", check, dead(hash, "")),
		with("dead letter bad fingerprint", check, dead("x", "r")),
		with("dead letter reason too long", check, dead(hash, strings.Repeat("r", 1025))),
		with("dead letter without body", null, stmt{`INSERT INTO dead_letters (fingerprint, body, reason) VALUES ($1, NULL, 'r')`, []any{hash}}),
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.Exec(c.sql, c.args...)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				t.Fatalf("insert accepted or failed oddly: %v", err)
			}
			if pgErr.Code != c.state {
				t.Errorf("SQLSTATE %s (%s), want %s", pgErr.Code, pgErr.Message, c.state)
			}
		})
	}
}

// TestPurchaseUserMigrationRepairsRefunds: a database written before
// 00002 (refund rows on the cancelling event's user, no purchaser column)
// gets the purchaser recorded and its refund rows moved to the purchaser.
func TestPurchaseUserMigrationRepairsRefunds(t *testing.T) {
	db := sqlDB(t, false)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	// Paid by user 1, cancelled by user 2; paid by user 3 with no ledger row
	// yet; never paid.
	mustExec(t, db, `INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, purchased, purchase_points, refunded)
		VALUES ('a', 2, 'CANCELLED', 3, 1000, $1, true, 10, true), ('b', 3, 'PAID', 2, 500, $1, true, 5, false),
		('c', 4, 'CREATED', 1, 0, $1, false, 0, false)`, hash)
	mustExec(t, db, `INSERT INTO points_ledger (order_id, user_id, kind, points, version)
		VALUES ('a', 1, 'purchase', 10, 2), ('a', 2, 'refund', -10, 3)`)
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT order_id, coalesce(purchase_user_id, 0) FROM orders ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var u int64
		if err := rows.Scan(&id, &u); err != nil {
			t.Fatal(err)
		}
		got[id] = u
	}
	rows.Close()
	if got["a"] != 1 || got["b"] != 3 || got["c"] != 0 {
		t.Errorf("purchase_user_id by order %v, want a:1 (the purchase row's user) b:3 (no row yet: the order's user) c:0", got)
	}
	var refundUser int64
	if err := db.QueryRow(`SELECT user_id FROM points_ledger WHERE order_id = 'a' AND kind = 'refund'`).Scan(&refundUser); err != nil {
		t.Fatal(err)
	}
	if refundUser != 1 {
		t.Errorf("refund row of order a is on user %d, want the purchaser 1", refundUser)
	}
}

type stmt struct {
	sql  string
	args []any
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestDeadLetterCompressionMigrationMarksOldOversizeRows: 00007 adds
// body_compression; rows parked before it with the oversize reason of a
// refused inflation are zlib (earlier releases inflated nothing else), the
// others have none; a name it does not know is refused.
func TestDeadLetterCompressionMigrationMarksOldOversizeRows(t *testing.T) {
	db := sqlDB(t, false)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	// The fingerprints are 64 hex digits; f1..f3 stand for them below.
	fp := func(n string) string { return strings.Repeat(n, 64) }
	mustExec(t, db, `INSERT INTO dead_letters (fingerprint, topic, message_id, keys, tags, body, reason) VALUES
		($1, 'T', 'm1', 'o-1', 'PAID', '\x789c', 'oversize: compressed body inflates past 65536 bytes'),
		($2, 'T', 'm2', 'o-1', 'PAID', '\x28b52ffd', 'malformed_json: invalid character ''('' looking for beginning of value'),
		($3, 'T', 'm3', 'o-1', 'PAID', '{}', 'oversize: 70000 bytes > 65536')`, fp("1"), fp("2"), fp("3"))
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	rows, err := db.Query(`SELECT left(fingerprint, 1), body_compression FROM dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var f, c string
		if err := rows.Scan(&f, &c); err != nil {
			t.Fatal(err)
		}
		got["f"+f] = c
	}
	rows.Close()
	if got["f1"] != "zlib" || got["f2"] != "" || got["f3"] != "" {
		t.Errorf("body_compression by row %v, want f1:zlib and none for f2, f3", got)
	}
	for _, c := range []string{"gzip", "type 3", "ZSTD"} {
		if _, err := db.Exec(`UPDATE dead_letters SET body_compression = $1 WHERE fingerprint = $2`, c, fp("2")); err == nil {
			t.Errorf("body_compression %q accepted", c)
		}
	}
	for _, c := range []string{"zstd", "lz4", "zlib", "type 5", ""} {
		mustExec(t, db, `UPDATE dead_letters SET body_compression = $1 WHERE fingerprint = $2`, c, fp("2"))
	}
}
