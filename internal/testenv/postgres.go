package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/migrations"
)

// pgTemplatePrefix names the migrated template databases; the rest of the
// name is a prefix of migrations.Fingerprint, so a schema change makes a new
// template instead of reusing a stale one.
const pgTemplatePrefix = "orderflow_tpl_"

// pgTestPrefix names the per-test databases.
const pgTestPrefix = "orderflow_test_"

// pgTemplateLockKey serializes template creation across processes (go test
// runs packages in parallel processes).
const pgTemplateLockKey = "orderflow/testenv/template"

// pgMaxOpenConns caps each test database's pool, so that parallel test
// processes stay well below the server's max_connections.
const pgMaxOpenConns = 16

var pgState struct {
	mu       sync.Mutex
	admin    *sql.DB
	adminURL *url.URL
	template string
}

// DatabaseURL returns the PostgreSQL server the tests use: DATABASE_URL, or
// config's default (the local stack, sslmode=disable).
func DatabaseURL() string { return config.FromEnv().DatabaseURL }

// NewDatabase returns a fresh, migrated PostgreSQL database for one test, and
// its connection URL (for processes the test starts). The database is a copy
// of a template database that is migrated once per schema version, so it
// costs a CREATE DATABASE, not a migration. It is dropped when the test ends.
//
// The server is the one DATABASE_URL names (default: config's). When it is
// unreachable the test fails, telling the user to run `make up`.
func NewDatabase(t testing.TB) (*gorm.DB, string) {
	t.Helper()
	return pgNew(t, true)
}

// NewDatabaseWithSecret is NewDatabase reached through a role of its own
// whose password is a fresh secret: it returns the connection URL with that
// password, and the password, for tests that plant secrets and look for
// them in a program's output. The role is dropped when the test ends.
func NewDatabaseWithSecret(t testing.TB) (dsn, password string) {
	t.Helper()
	_, base := NewDatabase(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	role := "secret_" + pgRandomSuffix()
	password = "planted-pw-" + pgRandomSuffix()
	admin := pgState.admin
	if _, err := admin.Exec(`CREATE ROLE ` + quoteIdent(role) + ` LOGIN PASSWORD '` + password + `' IN ROLE ` +
		quoteIdent(u.User.Username())); err != nil {
		t.Fatalf("testenv: create role: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(`DROP ROLE IF EXISTS ` + quoteIdent(role)) })
	u.User = url.UserPassword(role, password)
	return u.String(), password
}

// NewEmptyDatabase is NewDatabase without the schema: a fresh database with
// no migration applied, for tests of the migrations themselves.
func NewEmptyDatabase(t testing.TB) (*gorm.DB, string) {
	t.Helper()
	return pgNew(t, false)
}

func pgNew(t testing.TB, migrated bool) (*gorm.DB, string) {
	t.Helper()
	SkipShort(t, "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin, adminURL, tpl, err := pgPrepare(ctx)
	if err != nil {
		t.Fatalf("testenv: PostgreSQL: %v", err)
	}

	name := pgTestPrefix + pgRandomSuffix()
	if !migrated {
		tpl = "template1"
	}
	if err := pgCreateFromTemplate(ctx, admin, name, tpl); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	u := *adminURL
	u.Path = "/" + name
	dsn := u.String()

	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		pgDrop(admin, name)
		t.Fatalf("testenv: open database %s: %v", name, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		pgDrop(admin, name)
		t.Fatalf("testenv: database %s: %v", name, err)
	}
	sqlDB.SetMaxOpenConns(pgMaxOpenConns)
	sqlDB.SetMaxIdleConns(pgMaxOpenConns)
	t.Cleanup(func() {
		_ = sqlDB.Close()
		if err := pgDrop(admin, name); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	return db, dsn
}

// pgPrepare connects the admin pool and makes sure the template database of
// the current schema exists, once per process.
func pgPrepare(ctx context.Context) (*sql.DB, *url.URL, string, error) {
	pgState.mu.Lock()
	defer pgState.mu.Unlock()
	if pgState.admin == nil {
		raw := config.FromEnv().DatabaseURL
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return nil, nil, "", fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", config.Redact(raw))
		}
		admin, err := sql.Open("pgx", raw)
		if err != nil {
			return nil, nil, "", fmt.Errorf("open %s: %w", redact(u), err)
		}
		admin.SetMaxOpenConns(4)
		pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = admin.PingContext(pingCtx)
		cancel()
		if err != nil {
			_ = admin.Close()
			return nil, nil, "", fmt.Errorf("%s is unreachable (%v): run `make up` to start the local stack", redact(u), err)
		}
		pgState.admin, pgState.adminURL = admin, u
	}
	if pgState.template == "" {
		tpl, err := pgEnsureTemplate(ctx, pgState.admin, pgState.adminURL)
		if err != nil {
			return nil, nil, "", err
		}
		pgState.template = tpl
	}
	return pgState.admin, pgState.adminURL, pgState.template, nil
}

// pgEnsureTemplate creates and migrates the template database unless another
// process already has. A session-level advisory lock serializes creators; a
// template is complete only once it is marked IS_TEMPLATE, so one left half
// made by a killed process is dropped and made again.
func pgEnsureTemplate(ctx context.Context, admin *sql.DB, adminURL *url.URL) (string, error) {
	fp, err := migrations.Fingerprint()
	if err != nil {
		return "", err
	}
	name := pgTemplatePrefix + fp[:16]

	conn, err := admin.Conn(ctx)
	if err != nil {
		return "", fmt.Errorf("admin connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, pgTemplateLockKey); err != nil {
		return "", fmt.Errorf("lock template creation: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, pgTemplateLockKey)
	}()

	var isTemplate bool
	err = conn.QueryRowContext(ctx, `SELECT datistemplate FROM pg_database WHERE datname = $1`, name).Scan(&isTemplate)
	switch {
	case err == nil && isTemplate:
		return name, nil
	case err == nil:
		if _, err := conn.ExecContext(ctx, `DROP DATABASE `+quoteIdent(name)+` WITH (FORCE)`); err != nil {
			return "", fmt.Errorf("drop incomplete template %s: %w", name, err)
		}
	case !errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("look up template %s: %w", name, err)
	}

	if _, err := conn.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil {
		return "", fmt.Errorf("create template %s: %w", name, err)
	}
	u := *adminURL
	u.Path = "/" + name
	tplDB, err := sql.Open("pgx", u.String())
	if err != nil {
		return "", fmt.Errorf("open template %s: %w", name, err)
	}
	err = migrations.Up(ctx, tplDB)
	_ = tplDB.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template %s: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+quoteIdent(name)+` IS_TEMPLATE true`); err != nil {
		return "", fmt.Errorf("mark template %s: %w", name, err)
	}
	return name, nil
}

// pgCreateFromTemplate copies the template. PostgreSQL refuses while another
// session is connected to the template (SQLSTATE 55006), which can happen for
// an instant while a parallel process finishes with it: retry briefly.
func pgCreateFromTemplate(ctx context.Context, admin *sql.DB, name, tpl string) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		_, err = admin.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)+` TEMPLATE `+quoteIdent(tpl))
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

// pgDrop drops a test database, disconnecting any session left on it.
func pgDrop(admin *sql.DB, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+quoteIdent(name)+` WITH (FORCE)`)
	return err
}

func pgRandomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func redact(u *url.URL) string { return u.Redacted() }
