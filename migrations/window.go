package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"

	"github.com/pressly/goose/v3"
)

// Kind says what a migration does to the binaries of the schema before it.
type Kind string

// Kinds of migration.
const (
	// Expand adds: the previous release keeps running on the new schema.
	Expand Kind = "expand"
	// Contract removes or restricts something an older binary uses: the
	// binaries of a schema older than its OldestBinary may not run on it.
	Contract Kind = "contract"
)

// Step is one migration file's declared kind.
type Step struct {
	Version int64
	File    string
	Kind    Kind
	// OldestBinary is, for a contract step, the oldest binary schema
	// version that may run on the schema it makes; 0 for an expand step.
	OldestBinary int64
}

// WindowVersion is the migration that records the schema window (the
// orderflow_schema table). A schema older than it has no window: a binary
// of such a schema runs on it alone.
const WindowVersion = 8

var kindLine = regexp.MustCompile(`(?m)^-- orderflow: (expand|contract, oldest binary ([0-9]+))\.`)

// Steps returns every embedded migration's declared kind, in order. A file
// that does not declare one, in a line "-- orderflow: expand." or "--
// orderflow: contract, oldest binary N.", is an error.
func Steps() ([]Step, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrations: list files: %w", err)
	}
	var steps []Step
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", n, err)
		}
		b, err := FS.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("migrations: read %s: %w", n, err)
		}
		m := kindLine.FindAllSubmatch(b, -1)
		if len(m) != 1 {
			return nil, fmt.Errorf("migrations: %s declares %d kinds; it must declare one: a line \"-- orderflow: expand.\" or \"-- orderflow: contract, oldest binary N.\"", n, len(m))
		}
		s := Step{Version: v, File: n, Kind: Expand}
		if len(m[0][2]) > 0 {
			s.Kind = Contract
			s.OldestBinary, _ = strconv.ParseInt(string(m[0][2]), 10, 64)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// oldestBinary reads the schema window's lower end from orderflow_schema.
func oldestBinary(ctx context.Context, db *sql.DB) (int64, error) {
	var v int64
	err := db.QueryRowContext(ctx, `SELECT oldest_binary FROM orderflow_schema`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errors.New("migrations: orderflow_schema has no row")
	}
	if err != nil {
		return 0, fmt.Errorf("migrations: read the schema window: %w", err)
	}
	return v, nil
}

// ErrContractStep is wrapped by Revert's error when undoing would cross a
// contract step: its Down cannot give back what it removed.
var ErrContractStep = errors.New("cannot undo a contract step")

// Revert undoes the expand steps above version to, newest first (their
// goose Down sections), so that a release of schema to may run again on a
// schema that predates the window (WindowVersion). It refuses, undoing
// nothing, when a step to undo is a contract step, or when the schema holds
// a version this binary does not know. With dryRun it only returns what it
// would undo. Like Apply, it holds goose's lock.
func Revert(ctx context.Context, db *sql.DB, to int64, dryRun bool) (Result, error) {
	have, err := Version(ctx, db)
	if err != nil {
		return Result{}, err
	}
	latest, err := Latest()
	if err != nil {
		return Result{}, err
	}
	if have > latest {
		return Result{Version: have}, fmt.Errorf("migrations: the schema is at version %d, which this binary (schema %d) does not know: undo it with the release that migrated it", have, latest)
	}
	steps, err := Steps()
	if err != nil {
		return Result{}, err
	}
	res := Result{Version: have}
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Version <= to || s.Version > have {
			continue
		}
		if s.Kind == Contract {
			return Result{Version: have}, fmt.Errorf("migrations: %s: %w (it restricts or removes what binaries before schema %d use): restore a backup taken before it instead", s.File, ErrContractStep, s.OldestBinary)
		}
		res.Applied = append(res.Applied, s.File)
	}
	if dryRun || len(res.Applied) == 0 {
		return res, nil
	}
	p, err := provider(db)
	if err != nil {
		return Result{}, err
	}
	if _, err := p.DownTo(ctx, to); err != nil {
		return Result{}, fmt.Errorf("migrations: down to %d: %w", to, err)
	}
	if res.Version, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("migrations: schema version: %w", err)
	}
	return res, nil
}
