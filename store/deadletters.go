package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/wire"
)

// Parked says where a dead letter is stored.
type Parked struct {
	// ID is the dead_letters row holding the message.
	ID int64 `json:"id"`
	// Fingerprint is the message's Fingerprint.
	Fingerprint string `json:"fingerprint"`
	// TimesSeen counts the deliveries of the message, this one included.
	TimesSeen int64 `json:"times_seen"`
	// New is true when this call inserted the row.
	New bool `json:"new"`
}

// Fingerprint identifies a message for deduplication in dead_letters: the
// hex SHA-256 of its topic, keys and body (each length prefixed). The
// message ID is left out, so a producer retry (same body, new message ID)
// and a broker redelivery (same message ID) are both repeats.
func Fingerprint(dl wire.DeadLetter) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(dl.Topic), []byte(dl.Keys), dl.Body} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ParkDeadLetter stores a message that cannot be applied, with its reason.
// A repeat of the same message (same Fingerprint) does not add a row: it
// increments times_seen and last_seen_at, keeping the first message ID,
// tags and reason. The result says which row holds the message and how
// often it was seen.
//
// The reason is required: an empty one is refused with an error wrapping
// ErrInvalid, and nothing is written. The text fields must be storable
// (wire.Sanitize; the bridge's envelopes are); the body is stored as is,
// with the compression it is still in (Envelope.Compression), if any.
func (s *Store) ParkDeadLetter(ctx context.Context, dl wire.DeadLetter) (Parked, error) {
	if strings.TrimSpace(dl.Reason) == "" {
		return Parked{}, invalid(errors.New("dead letter reason is required"))
	}
	return parkDeadLetter(s.db.WithContext(ctx), dl)
}

func parkDeadLetter(db *gorm.DB, dl wire.DeadLetter) (Parked, error) {
	body := dl.Body
	if body == nil {
		body = []byte{}
	}
	var res Parked
	res.Fingerprint = Fingerprint(dl)
	err := db.Raw(`INSERT INTO dead_letters (fingerprint, topic, message_id, keys, tags, body, reason, body_compression)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (fingerprint) DO UPDATE SET
			times_seen = dead_letters.times_seen + 1, last_seen_at = now()
		RETURNING id, times_seen`,
		res.Fingerprint, dl.Topic, dl.MessageID, dl.Keys, dl.Tags, body,
		wire.Sanitize(strings.TrimSpace(dl.Reason), wire.MaxReasonLen), dl.Compression).Row().
		Scan(&res.ID, &res.TimesSeen)
	if err != nil {
		return Parked{}, fmt.Errorf("park dead letter: %w", err)
	}
	res.New = res.TimesSeen == 1
	return res, nil
}
