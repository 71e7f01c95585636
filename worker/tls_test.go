package main

import (
	"testing"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestWorkerReachesTemporalOverTLSWithAPIKey starts the worker binary with
// the settings a TLS cluster with API keys needs — TEMPORAL_API_KEY and
// TEMPORAL_TLS_SERVER_CA_CERT_PATH — against a TLS-terminating proxy in
// front of the local Temporal server: it must poll, over TLS, sending the
// key as a bearer token.
func TestWorkerReachesTemporalOverTLSWithAPIKey(t *testing.T) {
	_, dsn := testenv.NewDatabase(t)
	proxy := testenv.StartTLSProxy(t, testenv.TemporalAddress())
	key := "planted-api-key-" + uniq.Name("tls")
	p := startWorker(t, dsn, uniq.Name("tls"), "-temporal-address", proxy.Addr(), "-temporal-api-key", key,
		"-temporal-tls-server-ca-cert-path", proxy.CAFile)
	if status, body := p.ready(); status != 200 {
		t.Errorf("/readyz = %d: %s", status, body)
	}
	if proxy.Handshakes() == 0 || !proxy.SawAuthorization("Bearer "+key) {
		t.Errorf("the proxy saw %d TLS handshakes and the API key: %v", proxy.Handshakes(), proxy.SawAuthorization("Bearer "+key))
	}
	testenv.NoSecrets(t, "the worker's log", p.Output(), key)
	t.Logf("worker polling through TLS (%d handshakes) with the API key as bearer token", proxy.Handshakes())
}
