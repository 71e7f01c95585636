package mq_test

import (
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/mq"
)

func TestEventMessageRoutesByBody(t *testing.T) {
	body := []byte(`{"event_id":"e1","order_id":"o-1","user_id":7,"status":"PAID","version":2,"amount_cents":100,"occurred_at":"2025-01-01T00:00:00Z"}`)
	m, err := mq.EventMessage("T", body)
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "T" || m.Keys != "o-1" || m.ShardingKey != "o-1" || m.Tag != "PAID" || string(m.Body) != string(body) {
		t.Fatalf("message %+v", m)
	}
	for _, bad := range []string{`{"status":"PAID"}`, `not json`, `[]`} {
		if _, err := mq.EventMessage("T", []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "mq: ") {
			t.Errorf("body %s: error %v", bad, err)
		}
	}
}
