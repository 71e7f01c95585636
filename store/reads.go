package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orderflow/orderflow/wire"
)

// DeadLetterRow is a parked message as stored.
type DeadLetterRow struct {
	ID        int64  `json:"id"`
	Topic     string `json:"topic"`
	MessageID string `json:"message_id"`
	Keys      string `json:"keys"`
	Tags      string `json:"tags"`
	Body      []byte `json:"body"`
	// BodyCompression is the compression Body is still in ("zlib",
	// "lz4", "zstd", "type N"), "" when it is as the producer wrote it.
	BodyCompression string    `json:"body_compression,omitempty"`
	Reason          string    `json:"reason"`
	TimesSeen       int64     `json:"times_seen"`
	FirstSeenAt     time.Time `json:"first_seen_at"`
	LastSeenAt      time.Time `json:"last_seen_at"`
	// ReplayedAt is when `orderflow dlq replay` re-delivered the message
	// (nil: never), and ReplayOutcome the decision recorded for it then.
	ReplayedAt    *time.Time `json:"replayed_at,omitempty"`
	ReplayOutcome string     `json:"replay_outcome,omitempty"`
}

// Envelope is the parked message as the bridge received it, to parse or
// deliver again. A body still compressed carries its compression; one
// whose inflation was refused (wire.InflateRefusedReason) says
// so, and is zlib when no compression is stored (a bridge of an earlier
// release parked it: those inflated zlib only).
func (d DeadLetterRow) Envelope() wire.Envelope {
	env := wire.NewEnvelope(d.Topic, d.MessageID, d.Keys, d.Tags, d.Body, time.Time{}, false)
	env.Compression = d.BodyCompression
	env.InflateRefused = d.Reason == wire.InflateRefusedReason()
	if env.InflateRefused && env.Compression == "" {
		env.Compression = compressionZlib
	}
	return env
}

// Compressions a stored body can be recognised by (LegacyCompression).
const (
	compressionZlib = "zlib"
	compressionLZ4  = "lz4"
	compressionZstd = "zstd"
)

// LegacyCompression is, for a dead letter an earlier release parked as
// malformed_json with no compression stored, the compression its body's
// magic number names: "zstd" (a frame, 28 B5 2F FD), "lz4" (a frame,
// 04 22 4D 18) or "zlib" (a valid zlib header without a dictionary), and
// "" otherwise. Those releases handed LZ4 and zstd bodies to the bridge
// still compressed, as if they were plain; `orderflow dlq replay` decodes
// such a body when it can and judges it as stored when it cannot.
func (d DeadLetterRow) LegacyCompression() string {
	if d.BodyCompression != "" || d.Kind() != wire.KindMalformedJSON {
		return ""
	}
	return compressionByMagic(d.Body)
}

// compressionByMagic names the compressed format body starts with, or "".
func compressionByMagic(body []byte) string {
	switch {
	case bytes.HasPrefix(body, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return compressionZstd
	case bytes.HasPrefix(body, []byte{0x04, 0x22, 0x4d, 0x18}):
		return compressionLZ4
	case len(body) >= 2 && isZlibHeader(body[0], body[1]):
		return compressionZlib
	}
	return ""
}

// isZlibHeader reports whether cmf and flg open a zlib stream (RFC 1950):
// method 8 (deflate) with a window of at most 32 KiB, a header checksum
// that divides by 31, and no preset dictionary.
func isZlibHeader(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0 && flg&0x20 == 0
}

// Kind is the rejection kind of the dead letter: its reason's first word
// ("conflict", "oversize", "malformed_json", ...).
func (d DeadLetterRow) Kind() string { return ReasonKind(d.Reason) }

// ReasonKind is the first word of a dead letter's reason, before the colon.
func ReasonKind(reason string) string {
	kind, _, _ := strings.Cut(reason, ":")
	return strings.TrimSpace(kind)
}

// DeadLetterFilter selects dead letters; zero fields select everything.
type DeadLetterFilter struct {
	// Kind is a rejection kind (the reason's first word).
	Kind string
	// OrderID matches a dead letter whose keys name the order.
	OrderID string
	// Since keeps the dead letters last seen at or after it.
	Since time.Time
	// AfterID keeps the dead letters whose id is greater (paging).
	AfterID int64
	// Limit bounds how many rows DeadLetters returns (default 100).
	Limit int
}

// where is the filter's SQL condition and its arguments.
func (f DeadLetterFilter) where() (string, []any) {
	var conds []string
	var args []any
	if f.Kind != "" {
		conds = append(conds, `reason LIKE ? || ':%'`)
		args = append(args, f.Kind)
	}
	if f.OrderID != "" {
		conds = append(conds, `? = ANY (string_to_array(keys, ' '))`)
		args = append(args, f.OrderID)
	}
	if !f.Since.IsZero() {
		conds = append(conds, `last_seen_at >= ?`)
		args = append(args, f.Since)
	}
	if f.AfterID > 0 {
		conds = append(conds, `id > ?`)
		args = append(args, f.AfterID)
	}
	if len(conds) == 0 {
		return "true", nil
	}
	return strings.Join(conds, " AND "), args
}

const deadLetterColumns = `id, topic, message_id, keys, tags, body, reason, times_seen, first_seen_at, last_seen_at,
	replayed_at, coalesce(replay_outcome, ''), body_compression`

// DeadLetters returns the dead letters f selects, oldest first, at most
// f.Limit of them.
func (s *Store) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetterRow, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	where, args := f.where()
	rows, err := s.db.WithContext(ctx).Raw(`SELECT `+deadLetterColumns+` FROM dead_letters WHERE `+where+
		` ORDER BY id LIMIT ?`, append(args, limit)...).Rows()
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	defer rows.Close()
	var out []DeadLetterRow
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return nil, fmt.Errorf("list dead letters: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// KindCount is how many dead letters (and deliveries of them) one
// rejection kind holds.
type KindCount struct {
	Kind       string    `json:"kind"`
	Count      int64     `json:"count"`
	TimesSeen  int64     `json:"times_seen"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// DeadLetterSummary counts the dead letters f selects by rejection kind,
// most first.
func (s *Store) DeadLetterSummary(ctx context.Context, f DeadLetterFilter) ([]KindCount, error) {
	where, args := f.where()
	var out []KindCount
	err := s.db.WithContext(ctx).Raw(`SELECT trim(split_part(reason, ':', 1)) AS kind, count(*) AS count,
			sum(times_seen) AS times_seen, max(last_seen_at) AS last_seen_at
		FROM dead_letters WHERE `+where+` GROUP BY 1 ORDER BY 2 DESC, 1`, args...).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("summarize dead letters: %w", err)
	}
	return out, nil
}

// DeadLetter returns the dead letter id, and false when there is none.
func (s *Store) DeadLetter(ctx context.Context, id int64) (DeadLetterRow, bool, error) {
	row := s.db.WithContext(ctx).Raw(`SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = ?`, id).Row()
	d, err := scanDeadLetter(row)
	if errors.Is(err, sql.ErrNoRows) {
		return DeadLetterRow{}, false, nil
	}
	if err != nil {
		return DeadLetterRow{}, false, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	return d, true, nil
}

func scanDeadLetter(r interface{ Scan(...any) error }) (DeadLetterRow, error) {
	var d DeadLetterRow
	var replayed sql.NullTime
	err := r.Scan(&d.ID, &d.Topic, &d.MessageID, &d.Keys, &d.Tags, &d.Body, &d.Reason, &d.TimesSeen, &d.FirstSeenAt, &d.LastSeenAt,
		&replayed, &d.ReplayOutcome, &d.BodyCompression)
	if replayed.Valid {
		t := replayed.Time
		d.ReplayedAt = &t
	}
	return d, err
}
