package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/migrations"
	"github.com/orderflow/orderflow/store"
)

// makeUp is the hint every service failure ends with.
const makeUp = "start the local stack with `make up` (see `make status`)"

// database is a fresh, migrated PostgreSQL database of one benchmark cell.
type database struct {
	DSN   string
	DB    *gorm.DB
	store *store.Store
	drop  func() error
}

// Close closes the pool and drops the database.
func (d *database) Close() error {
	_ = d.store.Close()
	return d.drop()
}

// newDatabase creates a fresh database on the server that adminURL
// (DATABASE_URL) names and migrates it, as `orderflow migrate` does before
// a deployment's worker and bridge start.
func newDatabase(ctx context.Context, adminURL string) (*database, error) {
	name := strings.ReplaceAll(uniq.Name("orderflow_bench"), "-", "_")
	if err := adminExec(ctx, adminURL, `CREATE DATABASE `+name); err != nil {
		return nil, fmt.Errorf("%w; %s", err, makeUp)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return dropDatabases(ctx, adminURL, name)
	}
	u, _ := url.Parse(adminURL) // parsed by adminExec
	u.Path = "/" + name
	dsn := u.String()
	db, err := sql.Open("pgx", dsn)
	if err == nil {
		err = migrations.Up(ctx, db)
		_ = db.Close()
	}
	if err != nil {
		_ = drop()
		return nil, fmt.Errorf("migrate database %s: %w", name, err)
	}
	st, err := store.Open(ctx, dsn, 8)
	if err != nil {
		_ = drop()
		return nil, fmt.Errorf("open database %s: %w", name, err)
	}
	return &database{DSN: dsn, DB: st.DB(), store: st, drop: drop}, nil
}

// dropDatabases drops the named databases, when they exist, ending the
// sessions still on them.
func dropDatabases(ctx context.Context, adminURL string, names ...string) error {
	var stmts []string
	for _, name := range names {
		stmts = append(stmts, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	}
	return adminExec(ctx, adminURL, stmts...)
}

// adminExec runs the statements on the server that adminURL names.
func adminExec(ctx context.Context, adminURL string, stmts ...string) error {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", adminURL)
	}
	if len(stmts) == 0 {
		return nil
	}
	db, err := sql.Open("pgx", adminURL)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("PostgreSQL at %s: %s: %w", u.Redacted(), s, err)
		}
	}
	return nil
}

// dialCheck fails when nothing listens at addr, naming what should.
func dialCheck(what, addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fmt.Errorf("%s at %s is unreachable (%w); %s", what, addr, err, makeUp)
	}
	return conn.Close()
}
