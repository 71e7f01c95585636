package activities

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// DeadLetterFingerprint identifies a message for deduplication in
// dead_letters: the hex SHA-256 of its topic, keys and body (each length
// prefixed). The message ID is left out, so a producer retry (same body, new
// message ID) and a broker redelivery (same message ID) are both repeats.
func DeadLetterFingerprint(dl DeadLetter) string {
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
// A repeat of the same message (same DeadLetterFingerprint) does not add a
// row: it increments times_seen and last_seen_at, keeping the first message
// ID, tags and reason. The result says which row holds the message and how
// often it was seen.
//
// The reason is required: an empty one is a non-retryable ErrTypeInvalidInput
// error and writes nothing. Text fields are stored as valid UTF-8 without
// NUL bytes (invalid bytes become U+FFFD) and the reason is cut to 1024
// characters; the body is stored as is. Database errors are retryable.
//
// ParkDeadLetter needs no activity context: the bridge calls it directly for
// messages it cannot decode.
func (a *Activities) ParkDeadLetter(ctx context.Context, dl DeadLetter) (ParkDeadLetterResult, error) {
	if strings.TrimSpace(dl.Reason) == "" {
		return ParkDeadLetterResult{}, invalid(ErrTypeInvalidInput, errors.New("dead letter reason is required"))
	}
	return parkDeadLetter(a.DB.WithContext(ctx), dl)
}

func parkDeadLetter(db *gorm.DB, dl DeadLetter) (ParkDeadLetterResult, error) {
	body := dl.Body
	if body == nil {
		body = []byte{}
	}
	var res ParkDeadLetterResult
	res.Fingerprint = DeadLetterFingerprint(dl)
	err := db.Raw(`INSERT INTO dead_letters (fingerprint, topic, message_id, keys, tags, body, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (fingerprint) DO UPDATE SET
			times_seen = dead_letters.times_seen + 1, last_seen_at = now()
		RETURNING id, times_seen`,
		res.Fingerprint, cleanText(dl.Topic, 0), cleanText(dl.MessageID, 0), cleanText(dl.Keys, 0),
		cleanText(dl.Tags, 0), body, cleanText(strings.TrimSpace(dl.Reason), maxReasonLen)).Row().
		Scan(&res.ID, &res.TimesSeen)
	if err != nil {
		return ParkDeadLetterResult{}, fmt.Errorf("park dead letter: %w", err)
	}
	res.New = res.TimesSeen == 1
	return res, nil
}
