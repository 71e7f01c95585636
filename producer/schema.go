package producer

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/migrations"
)

// schemaLockID is the advisory lock CreateSchema holds ("producer" in
// ASCII).
const schemaLockID int64 = 0x70726f6475636572

// schemaFile is the migration that holds the producer's tables.
const schemaFile = "00005_outbox.sql"

// Schema returns the SQL that creates the producer's tables,
// producer_sequences and producer_outbox, in the producer's database. It is
// the "Up" part of orderflow's migration 00005_outbox.sql, so the two never
// differ; every statement is idempotent (IF NOT EXISTS). Apply it with
// CreateSchema, or copy it into the service's own migrations.
func Schema() string {
	b, err := migrations.FS.ReadFile(schemaFile)
	if err != nil {
		panic(fmt.Sprintf("producer: migration %s is not embedded: %v", schemaFile, err))
	}
	s := string(b)
	up := strings.Index(s, "-- +goose Up")
	down := strings.Index(s, "-- +goose Down")
	if up < 0 || down < up {
		panic(fmt.Sprintf("producer: migration %s has no goose Up and Down sections", schemaFile))
	}
	return strings.TrimSpace(s[up+len("-- +goose Up") : down])
}

// CreateSchema creates the producer's tables in db, the database the
// producer's sequences and outbox live in (an upstream service's own
// database), unless they exist. It is safe to call on every start.
func CreateSchema(ctx context.Context, db *gorm.DB) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Two services starting at once must not race on the catalog.
		if err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, schemaLockID).Error; err != nil {
			return fmt.Errorf("producer: create schema: %w", err)
		}
		for _, stmt := range strings.Split(Schema(), ";") {
			if strings.TrimSpace(stripComments(stmt)) == "" {
				continue
			}
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("producer: create schema: %w", err)
			}
		}
		return nil
	})
}

// stripComments drops "--" comment lines, to tell an empty statement.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	return b.String()
}
