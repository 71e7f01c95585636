package producer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

func TestConfigIsChecked(t *testing.T) {
	ok := Config{NameServer: "127.0.0.1:9876", ProducerID: "p1"}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no name server", Config{ProducerID: "p1"}, "NameServer"},
		{"no producer ID", Config{NameServer: "x:1"}, "ProducerID is required"},
		{"long producer ID", Config{NameServer: "x:1", ProducerID: strings.Repeat("p", 65)}, "must be 1-64 characters"},
		{"NUL in producer ID", Config{NameServer: "x:1", ProducerID: "a\x00b"}, "must be 1-64 characters"},
		{"invalid UTF-8", Config{NameServer: "x:1", ProducerID: "a\xffb"}, "must be 1-64 characters"},
		{"space in producer ID", Config{NameServer: "x:1", ProducerID: "shop 1"}, "must be 1-64 characters"},
		{"ESC in producer ID", Config{NameServer: "x:1", ProducerID: "p\x1b[2J"}, "must be 1-64 characters"},
	} {
		if err := c.cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: validate = %v, want an error with %q", c.name, err, c.want)
		}
	}
	if err := ok.validate(); err != nil {
		t.Errorf("validate(%+v) = %v", ok, err)
	}
	if _, err := New(nil, ok); err == nil {
		t.Error("New without a database succeeded")
	}
	if _, err := NewTx(context.Background(), nil, ok); err == nil {
		t.Error("NewTx without a database succeeded")
	}
	d := ok.withDefaults()
	if d.Topic != DefaultTopic || d.MaxAttempts != 5 || d.SendTimeout != 5*time.Second || d.LocalTimeout != time.Minute || d.Logger == nil {
		t.Errorf("defaults: %+v", d)
	}
}

func TestSchemaIsTheMigrationsUpPart(t *testing.T) {
	s := Schema()
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS producer_sequences", "CREATE TABLE IF NOT EXISTS producer_outbox"} {
		if !strings.Contains(s, want) {
			t.Errorf("Schema lacks %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"goose", "DROP TABLE"} {
		if strings.Contains(s, not) {
			t.Errorf("Schema contains %q:\n%s", not, s)
		}
	}
}

func TestCreateSchemaIsIdempotent(t *testing.T) {
	ctx := context.Background()
	empty, _ := testenv.NewEmptyDatabase(t)
	for i := 0; i < 2; i++ {
		if err := CreateSchema(ctx, empty); err != nil {
			t.Fatalf("CreateSchema #%d: %v", i+1, err)
		}
	}
	for _, table := range []string{"producer_sequences", "producer_outbox"} {
		var n int64
		if err := empty.Raw(`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = ?`, table).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s missing after CreateSchema", table)
		}
	}
	// orderflow's migrations made the same tables: nothing to do.
	migrated, _ := testenv.NewDatabase(t)
	if err := CreateSchema(ctx, migrated); err != nil {
		t.Fatalf("CreateSchema on a migrated database: %v", err)
	}
}

func TestAllocateCountsOnlyCommittedNumbers(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.NewDatabase(t)
	pid := uniq.Name("p")
	if n, err := NextSeq(ctx, db, pid); err != nil || n != 1 {
		t.Fatalf("NextSeq of a new producer = %d, %v; want 1", n, err)
	}
	for want := int64(1); want <= 3; want++ {
		tx := db.Begin()
		got, err := allocate(tx, pid)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("allocate = %d, want %d", got, want)
		}
		tx.Rollback() // a failed send: the number is handed out again
		tx = db.Begin()
		if got, err = allocate(tx, pid); err != nil || got != want {
			t.Fatalf("allocate after a rollback = %d, %v; want %d", got, err, want)
		}
		if err := tx.Commit().Error; err != nil {
			t.Fatal(err)
		}
	}
	if n, err := NextSeq(ctx, db, pid); err != nil || n != 4 {
		t.Fatalf("NextSeq = %d, %v; want 4", n, err)
	}
}

// TestDecide checks the check-back's answers on the outbox, including
// while the producer's local transaction still runs.
func TestDecide(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.NewDatabase(t)
	pid := uniq.Name("p")

	// Never numbered here: unknown, not rollback.
	if s, err := decide(ctx, db, "x", pid); s != mq.TxUnknown || err == nil || !strings.Contains(err.Error(), "never numbered") {
		t.Fatalf("decide for an unknown producer = %s, %v", s, err)
	}
	if n, _ := NextSeq(ctx, db, pid); n != 1 {
		t.Fatalf("decide left a sequence row: next %d", n)
	}

	// A first local transaction in flight (its insert of the sequence row
	// not committed): decide waits, then answers from what it did.
	tx := db.Begin()
	if _, err := allocate(tx, pid); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		s   mq.TxState
		err error
	}
	got := make(chan answer, 1)
	go func() {
		s, err := decide(ctx, db, "first", pid)
		got <- answer{s, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("decide did not wait for the running local transaction: %s, %v", a.s, a.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.Exec(`INSERT INTO producer_outbox (id, producer_id, seq, topic, keys, tag, body) VALUES ('first', ?, 1, 't', 'k', 'CREATED', '\x7b7d')`, pid).Error; err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.s != mq.TxCommit || a.err != nil {
		t.Fatalf("decide after the commit = %s, %v; want commit", a.s, a.err)
	}

	// A later local transaction in flight: decide waits for it; when it
	// rolls back, the answer is rollback.
	tx = db.Begin()
	if _, err := allocate(tx, pid); err != nil {
		t.Fatal(err)
	}
	go func() {
		s, err := decide(ctx, db, "second", pid)
		got <- answer{s, err}
	}()
	time.Sleep(500 * time.Millisecond)
	tx.Rollback()
	if a := <-got; a.s != mq.TxRollback || a.err != nil {
		t.Fatalf("decide after a rollback = %s, %v; want rollback", a.s, a.err)
	}

	// One that runs longer than the lock timeout: unknown, asked again later.
	tx = db.Begin()
	if _, err := allocate(tx, pid); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := decide(ctx, db, "third", pid)
	if s != mq.TxUnknown || err == nil {
		t.Fatalf("decide while a transaction holds the sequence = %s, %v; want unknown", s, err)
	}
	if took := time.Since(start); took < 2*time.Second || took > 10*time.Second {
		t.Errorf("decide gave up after %s, want about %s", took, checkLockTimeout)
	}
	tx.Rollback()

	// Settled: the committed one still commits, an absent one rolls back.
	if s, err := decide(ctx, db, "first", pid); s != mq.TxCommit || err != nil {
		t.Fatalf("decide(first) = %s, %v", s, err)
	}
	if s, err := decide(ctx, db, "never", pid); s != mq.TxRollback || err != nil {
		t.Fatalf("decide(never) = %s, %v", s, err)
	}
}

func TestPruneOutboxKeepsRecentRows(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.NewDatabase(t)
	for i, age := range []string{"2 days", "3 hours", "1 minute"} {
		if err := db.Exec(`INSERT INTO producer_outbox (id, producer_id, seq, topic, keys, tag, body, created_at)
			VALUES (?, 'p', ?, 't', 'k', 'CREATED', '\x7b7d', now() - ?::interval)`, age, i+1, age).Error; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := PruneOutbox(ctx, db, time.Minute); err == nil {
		t.Fatal("PruneOutbox of rows a minute old succeeded")
	}
	n, err := PruneOutbox(ctx, db, 24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneOutbox(24h) = %d, %v; want 1", n, err)
	}
	n, err = PruneOutbox(ctx, db, 2*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneOutbox(2h) = %d, %v; want 1", n, err)
	}
	var left []string
	if err := db.Raw(`SELECT id FROM producer_outbox`).Scan(&left).Error; err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != "1 minute" {
		t.Fatalf("left %v", left)
	}
}
