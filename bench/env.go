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
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/migrations"
	"github.com/orderflow/orderflow/store"
)

// makeUp is the hint every service failure ends with.
const makeUp = "start the local stack with `make up` (see `make status`)"

// database is a fresh, migrated PostgreSQL database of one benchmark cell.
type database struct {
	Name  string
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

// newDatabase creates and migrates a fresh database on the server that
// adminURL (DATABASE_URL) names.
func newDatabase(ctx context.Context, adminURL string) (*database, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", adminURL)
	}
	adm, err := gorm.Open(postgres.Open(adminURL), &gorm.Config{Logger: gormlogger.Discard})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", u.Redacted(), err)
	}
	closeAdm := func() {
		if sqlDB, err := adm.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}
	name := strings.ReplaceAll(uniq.Name("orderflow_bench"), "-", "_")
	if err := adm.WithContext(ctx).Exec(`CREATE DATABASE ` + name).Error; err != nil {
		closeAdm()
		return nil, fmt.Errorf("PostgreSQL at %s: create database %s: %w; %s", u.Redacted(), name, err, makeUp)
	}
	drop := func() error {
		defer closeAdm()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adm.WithContext(dctx).Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`).Error; err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	du := *u
	du.Path = "/" + name
	if err := migrate(ctx, du.String()); err != nil {
		_ = drop()
		return nil, fmt.Errorf("migrate database %s: %w", name, err)
	}
	st, err := store.Open(ctx, du.String(), 8)
	if err != nil {
		_ = drop()
		return nil, fmt.Errorf("open database %s: %w", name, err)
	}
	return &database{Name: name, DSN: du.String(), DB: st.DB(), store: st, drop: drop}, nil
}

// migrate applies the schema to the database at dsn, as `orderflow migrate`
// does before a deployment's worker and bridge start (they only check it).
func migrate(ctx context.Context, dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrations.Up(ctx, db)
}

// topicWait bounds the wait for a new topic's route: on a busy machine the
// broker's registration with the name server can take more than 30 s.
const topicWait = 2 * time.Minute

// createTopic creates a topic with the given number of queues on the broker
// and waits until the name server routes every queue.
func createTopic(ctx context.Context, namesrv []string, broker, name string, queues int) error {
	ctx, cancel := context.WithTimeout(ctx, topicWait)
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

// dropDatabases drops the named databases, when they exist, on the server
// that adminURL (DATABASE_URL) names, ending the sessions still on them.
func dropDatabases(ctx context.Context, adminURL string, names ...string) error {
	u, err := url.Parse(adminURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL must be a postgres:// URL: %w", err)
	}
	adm, err := gorm.Open(postgres.Open(adminURL), &gorm.Config{Logger: gormlogger.Discard})
	if err != nil {
		return fmt.Errorf("open %s: %w", u.Redacted(), err)
	}
	if sqlDB, err := adm.DB(); err == nil {
		defer sqlDB.Close()
	}
	for _, name := range names {
		if err := adm.WithContext(ctx).Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`).Error; err != nil {
			return fmt.Errorf("PostgreSQL at %s: drop database %s: %w", u.Redacted(), name, err)
		}
	}
	return nil
}
