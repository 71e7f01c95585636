// Package uniq makes names unique across processes, runs and machines, for
// test topics and groups, benchmark runs and client instance names.
package uniq

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"
)

// Name returns prefix followed by "-", the time in base 36 and 8 random hex
// digits. It is made of prefix and [a-z0-9-] only, so it is valid as a
// RocketMQ topic or group name, a Temporal task queue or an order ID when
// prefix is.
func Name(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + hex.EncodeToString(b[:])
}
