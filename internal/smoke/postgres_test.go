package smoke

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestPostgresQuery connects with DATABASE_URL (config's default when unset)
// as the application does, and round-trips a row through a temporary table.
func TestPostgresQuery(t *testing.T) {
	testenv.SkipShort(t, "PostgreSQL")
	url := config.FromEnv().DatabaseURL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL (DATABASE_URL) is unreachable: %v; start the local stack with `make up`", err)
	}
	defer conn.Close(context.Background())

	var version string
	var serverNum int
	if err := conn.QueryRow(ctx, "SELECT version(), current_setting('server_version_num')::int").Scan(&version, &serverNum); err != nil {
		t.Fatalf("query version: %v", err)
	}
	if !strings.HasPrefix(version, "PostgreSQL") {
		t.Fatalf("version() = %q, want a PostgreSQL server", version)
	}
	if serverNum < 150000 {
		t.Fatalf("server_version_num = %d, want PostgreSQL 15 or newer", serverNum)
	}

	// Durability must not be traded for speed on a crash-safety project.
	for setting, want := range map[string]string{"fsync": "on", "synchronous_commit": "on"} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatalf("current_setting(%s): %v", setting, err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", setting, got, want)
		}
	}

	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE smoke (id int PRIMARY KEY, note text NOT NULL)"); err != nil {
		t.Fatalf("create temp table: %v", err)
	}
	note := uniq.Name("note")
	if _, err := conn.Exec(ctx, "INSERT INTO smoke (id, note) VALUES ($1, $2)", 7, note); err != nil {
		t.Fatalf("insert: %v", err)
	}
	_, err = conn.Exec(ctx, "INSERT INTO smoke (id, note) VALUES ($1, $2)", 7, "duplicate")
	if err == nil || !strings.Contains(err.Error(), "23505") {
		t.Fatalf("second insert with the same key: err = %v, want a unique violation (23505)", err)
	}
	var got string
	if err := conn.QueryRow(ctx, "SELECT note FROM smoke WHERE id = $1", 7).Scan(&got); err != nil {
		t.Fatalf("select: %v", err)
	}
	if got != note {
		t.Fatalf("note = %q, want %q", got, note)
	}
}
