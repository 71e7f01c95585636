package main

import (
	"context"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestBridgeReachesTemporalOverTLSWithAPIKey starts the bridge binary with
// TEMPORAL_API_KEY and TEMPORAL_TLS_SERVER_CA_CERT_PATH against a
// TLS-terminating proxy in front of the local Temporal server: an event
// published to the topic must reach its workflow, over TLS, with the key
// sent as a bearer token.
func TestBridgeReachesTemporalOverTLSWithAPIKey(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 1)
	proxy := testenv.StartTLSProxy(t, testenv.TemporalAddress())
	key := "planted-api-key-" + uniq.Name("tls")
	p := procs.New(procs.Spec{Name: "bridge", Path: buildBridge(t), Env: []string{
		"TEMPORAL_ADDRESS=" + proxy.Addr(), "TEMPORAL_NAMESPACE=" + testenv.TemporalNamespace(),
		"TEMPORAL_API_KEY=" + key, "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + proxy.CAFile,
		"ORDERFLOW_TASK_QUEUE=" + e.taskQueue, "DATABASE_URL=" + e.dsn, "ROCKETMQ_NAMESRV=" + e.namesrv,
		"ORDERFLOW_TOPIC=" + e.topic, "ORDERFLOW_CONSUMER_GROUP=" + e.group, "ORDERFLOW_BRIDGE_METRICS_ADDR=127.0.0.1:0",
	}, ReadyOutput: `"msg":"bridge consuming"`, ReadyTimeout: time.Minute})
	t.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start bridge: %v\n%s", err, p.Output())
	}
	ev := e.event(0, 1, fsm.Created)
	e.publish(t, ev)
	e.waitAccounted(t, []fsm.Key{ev.Key()}, 0, time.Minute)
	if proxy.Handshakes() == 0 || !proxy.SawAuthorization("Bearer "+key) {
		t.Errorf("the proxy saw %d TLS handshakes and the API key: %v", proxy.Handshakes(), proxy.SawAuthorization("Bearer "+key))
	}
	if code, _, err := p.Stop(30 * time.Second); code != 0 || err != nil {
		t.Errorf("stop: exit %d, %v", code, err)
	}
	testenv.NoSecrets(t, "the bridge's log", p.Output(), key)
	t.Logf("event %s signalled through TLS (%d handshakes) with the API key as bearer token", ev.Key(), proxy.Handshakes())
}
