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

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/migrations"
)

// makeUp is the hint every service failure ends with.
const makeUp = "start the local stack with `make up` (see `make status`)"

// database is a fresh, migrated PostgreSQL database of one benchmark cell.
type database struct {
	Name string
	DSN  string
	DB   *sql.DB
	drop func() error
}

// Close closes the pool and drops the database.
func (d *database) Close() error {
	_ = d.DB.Close()
	return d.drop()
}

// newDatabase creates and migrates a fresh database on the server that
// adminURL (DATABASE_URL) names.
func newDatabase(ctx context.Context, adminURL string) (*database, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", adminURL)
	}
	adm, err := sql.Open("pgx", adminURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", u.Redacted(), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = adm.PingContext(pctx)
	cancel()
	if err != nil {
		_ = adm.Close()
		return nil, fmt.Errorf("PostgreSQL at %s is unreachable (%v); %s", u.Redacted(), err, makeUp)
	}
	name := strings.ReplaceAll(uniq.Name("orderflow_bench"), "-", "_")
	if _, err := adm.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		_ = adm.Close()
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		defer adm.Close()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.ExecContext(dctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	du := *u
	du.Path = "/" + name
	db, err := sql.Open("pgx", du.String())
	if err != nil {
		_ = drop()
		return nil, fmt.Errorf("open database %s: %w", name, err)
	}
	db.SetMaxOpenConns(8)
	if err := migrations.Up(ctx, db); err != nil {
		_ = db.Close()
		_ = drop()
		return nil, fmt.Errorf("migrate database %s: %w", name, err)
	}
	return &database{Name: name, DSN: du.String(), DB: db, drop: drop}, nil
}

// createTopic creates a topic with the given number of queues on the broker
// and waits until the name server routes every queue.
func createTopic(ctx context.Context, namesrv []string, broker, name string, queues int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := mq.CreateTopic(ctx, namesrv, broker, name, queues); err != nil {
		return fmt.Errorf("%w; %s", err, makeUp)
	}
	return nil
}

func dialCheck(what, addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fmt.Errorf("%s at %s is unreachable (%v); %s", what, addr, err, makeUp)
	}
	return conn.Close()
}

// buildBinaries builds the worker and the bridge into dir.
func buildBinaries(ctx context.Context, dir string) (worker, bridge string, err error) {
	if worker, err = procs.Build(ctx, "github.com/orderflow/orderflow/worker", dir); err != nil {
		return "", "", err
	}
	if bridge, err = procs.Build(ctx, "github.com/orderflow/orderflow/starter", dir); err != nil {
		return "", "", err
	}
	return worker, bridge, nil
}
