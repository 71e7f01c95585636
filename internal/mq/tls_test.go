package mq_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestTLSBroker runs a name server and a broker of its own in RocketMQ's
// enforcing TLS mode (third_party/rocketmq-client-go/ORDERFLOW.md, change
// 6): a plain client is refused; TLS clients create a topic, publish,
// consume, read the offsets and plan a rewind, through the name server
// and the broker.
func TestTLSBroker(t *testing.T) {
	start := time.Now()
	r := testenv.StartTLSRocketMQ(t)
	topic := uniq.Name("tls-events")
	r.CreateTopic(t, topic, 4)
	t.Logf("name server %s and broker %s in enforcing TLS mode, topic %s routed over TLS after %s",
		r.Namesrv, r.Broker, topic, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("plain client refused", func(t *testing.T) {
		// The servers close a connection that does not start with a TLS
		// handshake: a plain request (GET_ROUTEINFO_BY_TOPIC, 105, as the
		// client frames it) gets no answer.
		for _, addr := range []string{r.Namesrv, r.Broker} {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			hdr := []byte(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"extFields":{"topic":"` + topic + `"}}`)
			frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)))
			frame = binary.BigEndian.AppendUint32(frame, uint32(len(hdr)))
			_, _ = c.Write(append(frame, hdr...))
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := c.Read(make([]byte, 1024))
			c.Close()
			if n > 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a plain request to %s: %d bytes, %v; want the connection closed", addr, n, err)
			}
			t.Logf("plain request to %s: connection closed (%v)", addr, err)
		}
		p, err := mq.NewProducer(r.Namesrv, mq.WithProducerGroup(uniq.Name("plain")), mq.WithSendRetries(0),
			mq.WithSendTimeout(3*time.Second))
		if err == nil {
			defer p.Close()
			_, err = p.Publish(ctx, mq.Message{Topic: topic, Body: []byte(`{"plain":true}`)})
		}
		if err == nil {
			t.Fatal("a plain TCP producer published to an enforcing TLS broker")
		}
		t.Logf("plain producer: %v", err)
		off, err := mq.NewOffsetReader(r.Namesrv, "", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		if _, err := off.Offsets(ctx, "g", topic); err == nil {
			t.Fatal("a plain TCP offset reader read from an enforcing TLS name server")
		} else {
			t.Logf("plain offset reader: %v", err)
		}
	})

	t.Run("untrusted CA refused", func(t *testing.T) {
		off, err := mq.NewOffsetReader(r.Namesrv, "", "", &tls.Config{MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		_, err = off.Offsets(ctx, "g", topic)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("offsets with the system roots only: %v, want a certificate error", err)
		}
		t.Logf("system roots: %v", err)
	})

	t.Run("TLS publish and consume", func(t *testing.T) {
		const n = 40
		// The server name override: a name on the certificate that is no
		// address of the servers.
		named := r.TLS.Clone()
		named.ServerName = testenv.TLSServerName
		p, err := mq.NewProducer(r.Namesrv, mq.WithProducerGroup(uniq.Name("tls-producer")), mq.WithTLS(named))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pubStart := time.Now()
		for i := range n {
			body := fmt.Sprintf(`{"order_id":"tls-%d","status":"CREATED"}`, i)
			m, err := mq.EventMessage(topic, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Publish(ctx, m); err != nil {
				t.Fatalf("publish %d over TLS: %v", i, err)
			}
		}
		pubTook := time.Since(pubStart)

		var got received
		group := uniq.Name("tls-group")
		consStart := time.Now()
		newConsumer(t, mq.ConsumerConfig{NameServer: r.Namesrv, Topic: topic, Group: group, Goroutines: 4, TLS: r.TLS},
			func(_ context.Context, m *primitive.MessageExt) error { got.add(m); return nil })
		waitFor(t, fmt.Sprintf("%d messages consumed over TLS", n), 90*time.Second, func() bool { return got.count() == n })
		t.Logf("published %d messages over TLS in %s, consumed them all in %s", n, pubTook.Round(time.Millisecond),
			time.Since(consStart).Round(time.Millisecond))

		off, err := mq.NewOffsetReader(r.Namesrv, "", "", r.TLS)
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		var max, committed int64
		waitFor(t, "the group's offsets committed", 30*time.Second, func() bool {
			qs, err := off.Offsets(ctx, group, topic)
			if err != nil {
				t.Fatalf("offsets over TLS: %v", err)
			}
			max, committed = 0, 0
			for _, q := range qs {
				max += q.Max
				committed += max0(q.Committed)
			}
			return max == n && committed == n
		})
		t.Logf("offsets over TLS: %d stored, %d committed", max, committed)

		rw, err := mq.NewRewinder(r.Namesrv, "", "", r.TLS)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		plan, err := rw.Plan(ctx, group, topic, time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatalf("rewind plan over TLS: %v", err)
		}
		t.Logf("rewind plan over TLS: %+v", plan)
	})
}

func max0(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}
