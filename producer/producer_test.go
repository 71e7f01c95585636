package producer

import (
	"context"
	"strings"
	"testing"
	"time"

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
		{"long producer ID", Config{NameServer: "x:1", ProducerID: strings.Repeat("p", 129)}, "longer than 128"},
		{"NUL in producer ID", Config{NameServer: "x:1", ProducerID: "a\x00b"}, "NUL"},
		{"invalid UTF-8", Config{NameServer: "x:1", ProducerID: "a\xffb"}, "UTF-8"},
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
	d := ok.withDefaults()
	if d.Topic != DefaultTopic || d.MaxAttempts != 5 || d.SendTimeout != 5*time.Second || d.Logger == nil {
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
