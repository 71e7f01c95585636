package interop

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/orderflow/orderflow/scenario"
)

// line is one message for a Java program (see java/src/.../Line.java).
type line struct {
	Topic      string            `json:"topic"`
	Keys       []string          `json:"keys,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Body       string            `json:"body"` // base64
	Properties map[string]string `json:"properties,omitempty"`
	Tx         string            `json:"tx,omitempty"`
	Group      string            `json:"group,omitempty"`
	Batch      *int              `json:"batch,omitempty"`
	Shard      string            `json:"shard,omitempty"`
	RetryOf    *int              `json:"retry_of,omitempty"`

	body []byte // Body, decoded
}

// Transaction outcomes of a line.
const (
	txCommit   = "commit"
	txUnknown  = "unknown" // committed on the broker's check-back
	txRollback = "rollback"
)

// padding says which valid events get an extra field that makes their body
// larger than 4 KiB, the size from which the remoting client compresses.
type padding int

const (
	padHalf padding = iota // every other body, chosen by its hash
	padAll
)

// compressFrom is the remoting client's default compressMsgBodyOverHowmuch.
const compressFrom = 4096

// padBody adds a field "padding" (the contract ignores fields it does not
// define) to the front of a JSON object, so that the body is at least
// compressFrom+400 bytes. The padding is derived from the body, so copies
// of one body stay identical.
func padBody(body []byte) []byte {
	if len(body) == 0 || body[0] != '{' {
		return body
	}
	want := compressFrom + 400 - len(body)
	var b strings.Builder
	h := sha256.Sum256(body)
	for b.Len() < want {
		b.WriteString(hex.EncodeToString(h[:]))
		h = sha256.Sum256(h[:])
	}
	return append([]byte(`{"padding":"`+b.String()+`",`), body[1:]...)
}

func shouldPad(p padding, body []byte) bool {
	if p == padAll {
		return true
	}
	h := sha256.Sum256(body)
	return h[0]&1 == 0
}

// baseLines lays out a scenario's messages (in publish order) as lines for
// topic: keys, tag and body as the contract lays them out, the valid events
// padded as p says, the order ID as the shard.
func baseLines(msgs []scenario.Message, topic string, p padding) []line {
	out := make([]line, 0, len(msgs))
	for _, m := range msgs {
		body := m.Msg.Body
		if m.Kind != scenario.KindBad && shouldPad(p, body) {
			body = padBody(body)
		}
		l := line{Topic: topic, Tag: m.Msg.Tag, Shard: m.Msg.ShardingKey, body: body,
			Body: base64.StdEncoding.EncodeToString(body)}
		if m.Msg.Keys != "" {
			l.Keys = []string{m.Msg.Keys}
		}
		if l.Shard == "" {
			l.Shard = m.Msg.Keys
		}
		out = append(out, l)
	}
	return out
}

// batchLines numbers consecutive lines in batches of at most n messages
// and at most maxBytes of bodies (the broker refuses messages over 128 KiB,
// and a batch is stored whole, not compressed).
func batchLines(lines []line, n, maxBytes int) {
	batch, count, size := 0, 0, 0
	for i := range lines {
		b := len(lines[i].body)
		if count == n || (count > 0 && size+b > maxBytes) {
			batch, count, size = batch+1, 0, 0
		}
		v := batch
		lines[i].Batch = &v
		count++
		size += b
	}
}

// severalKeys gives each valid event three keys, its order ID second (the
// contract: a message's keys are whitespace-separated and one of them is
// the order ID).
func severalKeys(msgs []scenario.Message, lines []line) {
	for i, m := range msgs {
		if m.Kind == scenario.KindBad {
			continue // the checker finds a bad message's dead letter by its one key
		}
		lines[i].Keys = []string{m.Event.EventID, m.Event.OrderID, fmt.Sprintf("user-%d", m.Event.UserID)}
	}
}

// userProperties gives every message user properties: plain ASCII,
// non-ASCII text, and a W3C traceparent that is valid on every other
// message and malformed on the rest (which must start a trace of its own,
// never cause a rejection).
func userProperties(lines []line) {
	for i := range lines {
		tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if i%2 == 1 {
			tp = "not-a-traceparent"
		}
		lines[i].Properties = map[string]string{
			"origin":      "java-interop",
			"note":        "Bestellung über 3 Artikel, 注文",
			"traceparent": tp,
		}
	}
}

// retryDuplicates makes each duplicate a producer retry: sent again with
// the message ID of the first line that carried the same body.
func retryDuplicates(msgs []scenario.Message, lines []line) int {
	first := map[string]int{}
	n := 0
	for i, m := range msgs {
		key := string(lines[i].body)
		j, seen := first[key]
		if !seen {
			first[key] = i
			continue
		}
		if m.Kind == scenario.KindDuplicate {
			lines[i].RetryOf = &j
			n++
		}
	}
	return n
}

// transactional gives every line a transaction outcome: every n-th left
// unknown (committed on the broker's check-back; none when n is 0), the
// others committed.
func transactional(lines []line, n int) {
	for i := range lines {
		lines[i].Tx = txCommit
		if n > 0 && i%n == 1 {
			lines[i].Tx = txUnknown
		}
	}
}

// fifoGroups makes each line's message group its order ID (bad messages:
// their key).
func fifoGroups(lines []line) {
	for i := range lines {
		lines[i].Group = lines[i].Shard
	}
}

// neverApplied returns events from to from+n-1 of a rotation of events
// that must never take effect, each distinct: an
// update above an order's final version, a conflicting copy of a published
// event, and the first event of an order the scenario never publishes. Each
// is sent in a transaction that is never committed; had one been, the
// checker would find an event, an orders row or a dead letter the run never
// published.
func neverApplied(s *scenario.Scenario, from, n int, topic string, p padding, tx string) ([]line, error) {
	exp := &s.Expected
	if len(exp.Orders) == 0 || len(exp.Keys) == 0 {
		return nil, fmt.Errorf("scenario has no orders")
	}
	var out []line
	for i := from; i < from+n; i++ {
		var e scenario.Event
		switch i % 3 {
		case 0:
			o := exp.Orders[(i/3)%len(exp.Orders)]
			e = scenario.Event{EventID: fmt.Sprintf("%s-never-%d", o.OrderID, i), OrderID: o.OrderID,
				UserID: o.UserID, Status: o.Status, Version: o.Version + 1 + int64(i),
				AmountCents: o.AmountCents + 777, OccurredAt: exp.Keys[0].OccurredAt.Add(99 * 24 * time.Hour)}
		case 1:
			k := exp.Keys[len(exp.Keys)-1-(i/3)%len(exp.Keys)]
			e = scenario.Event{EventID: fmt.Sprintf("%s-never-%d", k.OrderID, i), OrderID: k.OrderID,
				UserID: k.UserID + 1, Status: k.Status, Version: k.Version, AmountCents: k.AmountCents + 1, OccurredAt: k.OccurredAt}
		default:
			id := scenario.OrderID(exp.Prefix, len(exp.Orders)+50+i)
			e = scenario.Event{EventID: id + "-v1", OrderID: id, UserID: 4242, Status: scenario.Created,
				Version: 1, AmountCents: 4242, OccurredAt: exp.Keys[0].OccurredAt}
		}
		body, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		if shouldPad(p, body) {
			body = padBody(body)
		}
		out = append(out, line{Topic: topic, Keys: []string{e.OrderID}, Tag: string(e.Status), Shard: e.OrderID,
			Group: e.OrderID, Tx: tx, body: body, Body: base64.StdEncoding.EncodeToString(body)})
	}
	return out, nil
}

// interleave puts extra at evenly spread places among lines.
func interleave(lines, extra []line) []line {
	out := make([]line, 0, len(lines)+len(extra))
	step := len(lines)/(len(extra)+1) + 1
	j := 0
	for i, l := range lines {
		if j < len(extra) && i > 0 && i%step == 0 {
			out = append(out, extra[j])
			j++
		}
		out = append(out, l)
	}
	return append(out, extra[j:]...)
}
