package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

func lookupOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestPrecedenceDefaultThenEnvThenFlag(t *testing.T) {
	var c Config
	var d time.Duration
	s := NewSet("t", "Usage: t", &bytes.Buffer{})
	c.RegisterTemporal(s)
	c.RegisterRocketMQ(s)
	c.RegisterConsumerGroup(s)
	s.Duration(&d, time.Second, Setting{Flag: "wait", Env: "T_WAIT", Usage: "how long"})
	env := map[string]string{"TEMPORAL_NAMESPACE": "prod", "ORDERFLOW_TOPIC": "", "T_WAIT": "3s", "ORDERFLOW_CONSUMER_GROUP": "g1"}
	if err := s.Parse([]string{"-consumer-group=g2"}, lookupOf(env)); err != nil {
		t.Fatal(err)
	}
	if c.TemporalNamespace != "prod" || d != 3*time.Second {
		t.Errorf("environment not applied: namespace %q, wait %s", c.TemporalNamespace, d)
	}
	if c.Topic != DefaultTopic {
		t.Errorf("an empty variable must keep the default, got topic %q", c.Topic)
	}
	if c.ConsumerGroup != "g2" {
		t.Errorf("the flag must win over the variable, got %q", c.ConsumerGroup)
	}
	if c.TaskQueue != "orderflow" || c.RocketMQNamesrv != DefaultRocketMQNamesrv {
		t.Errorf("defaults changed: %+v", c)
	}
	if !s.IsSet("temporal-namespace") || !s.IsSet("consumer-group") || s.IsSet("topic") {
		t.Errorf("IsSet: namespace %v, group %v, topic %v", s.IsSet("temporal-namespace"), s.IsSet("consumer-group"), s.IsSet("topic"))
	}
}

func TestBadVariableNamesItAndHidesSecrets(t *testing.T) {
	var n int
	var secret string
	s := NewSet("t", "Usage: t", &bytes.Buffer{})
	s.Int(&n, 1, Setting{Flag: "n", Env: "T_N", Usage: "a number"})
	err := s.Parse(nil, lookupOf(map[string]string{"T_N": "many"}))
	if err == nil || !strings.Contains(err.Error(), `T_N: invalid value "many"`) {
		t.Errorf("bad T_N: %v", err)
	}
	s = NewSet("t", "Usage: t", &bytes.Buffer{})
	s.Int(&n, 1, Setting{Flag: "n", Env: "T_N", Usage: "a number", Secret: true})
	s.String(&secret, "", Setting{Flag: "s", Env: "T_S", Usage: "a secret", Secret: true})
	err = s.Parse(nil, lookupOf(map[string]string{"T_N": "hunter2"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "T_N") {
		t.Errorf("bad secret T_N: %v, want the variable named and the value hidden", err)
	}
}

func TestUsageListsVariablesAndRedactsSecrets(t *testing.T) {
	var out bytes.Buffer
	var c Config
	s := NewSet("t", "Usage: t [flags]", &out)
	c.RegisterTemporal(s)
	c.RegisterDatabase(s)
	c.RegisterRocketMQ(s)
	c.RegisterRedis(s)
	env := map[string]string{"DATABASE_URL": "postgres://u:planted-pw@db:5432/x", "TEMPORAL_API_KEY": "planted-key",
		"ROCKETMQ_SECRET_KEY": "planted-sk", "REDIS_URL": "redis://:planted-redis-pw@cache:6379/0"}
	if err := s.Parse([]string{"-h"}, lookupOf(env)); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	text := out.String()
	for _, want := range []string{"Usage: t [flags]", "-database-url", "env DATABASE_URL", "-temporal-api-key", "env TEMPORAL_API_KEY",
		"-rocketmq-secret-key", "-temporal-tls-client-cert-path", "(env DATABASE_URL; secret; default postgres://orderflow:xxxxx@127.0.0.1:5432/orderflow",
		"(env ROCKETMQ_SECRET_KEY; secret)",
		"-redis-url", "env REDIS_URL", "redis://127.0.0.1:6379/0"} {
		if !strings.Contains(text, want) {
			t.Errorf("usage lacks %q:\n%s", want, text)
		}
	}
	for _, leak := range []string{"planted", "orderflow:orderflow@"} {
		if strings.Contains(text, leak) {
			t.Errorf("usage shows %q:\n%s", leak, text)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		"hunter2":                   "xxxxx",
		"postgres://u:pw@h:5432/db": "postgres://u:xxxxx@h:5432/db",
		"postgres://u@h/db?sslmode=require&password=pw": "postgres://u@h/db?password=xxxxx&sslmode=require",
		"redis://:pw@h:6379/0":                          "redis://:xxxxx@h:6379/0",
		"rediss://default:pw@h:6380/1":                  "rediss://default:xxxxx@h:6380/1",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTemporalClientOptions(t *testing.T) {
	dir := t.TempDir()
	c := Config{TemporalConfigFile: dir + "/none.toml"}
	opts, err := c.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != DefaultTemporalAddress || opts.Namespace != DefaultTemporalNamespace || opts.Credentials != nil ||
		opts.ConnectionOptions.TLS != nil {
		t.Errorf("defaults: %+v", opts)
	}
	c = Config{TemporalConfigFile: dir + "/none.toml", TemporalAddress: "ns.acct.tmprl.cloud:7233",
		TemporalNamespace: "ns.acct", TemporalAPIKey: "planted-key"}
	opts, err = c.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "ns.acct.tmprl.cloud:7233" || opts.Namespace != "ns.acct" || opts.Credentials == nil ||
		opts.ConnectionOptions.TLS == nil {
		t.Errorf("API key: %+v, want credentials and TLS", opts)
	}
}

// writeCert writes a self-signed certificate and its key (PEM) into dir.
func writeCert(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "orderflow-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, DNSNames: []string{"temporal.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// mTLS settings, from the environment as the worker and the bridge read
// them, become the client's TLS configuration.
func TestTemporalClientOptionsMTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	var c Config
	s := NewSet("t", "Usage: t", &bytes.Buffer{})
	c.RegisterTemporal(s)
	env := map[string]string{"TEMPORAL_ADDRESS": "temporal.test:7233", "TEMPORAL_NAMESPACE": "orders",
		"TEMPORAL_TLS_CLIENT_CERT_PATH": cert, "TEMPORAL_TLS_CLIENT_KEY_PATH": key,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": cert, "TEMPORAL_TLS_SERVER_NAME": "temporal.test",
		"TEMPORAL_CONFIG_FILE": filepath.Join(dir, "none.toml")}
	if err := s.Parse(nil, lookupOf(env)); err != nil {
		t.Fatal(err)
	}
	opts, err := c.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.ConnectionOptions.TLS
	if opts.HostPort != "temporal.test:7233" || opts.Namespace != "orders" || tc == nil {
		t.Fatalf("options %+v, want TLS to temporal.test:7233 in namespace orders", opts)
	}
	if tc.ServerName != "temporal.test" || tc.RootCAs == nil || (len(tc.Certificates) == 0 && tc.GetClientCertificate == nil) {
		t.Errorf("TLS config: server name %q, root CAs %v, client certificate %v", tc.ServerName, tc.RootCAs != nil,
			len(tc.Certificates) > 0 || tc.GetClientCertificate != nil)
	}
	t.Logf("client options: HostPort=%s Namespace=%s TLS{ServerName=%s RootCAs=%v ClientCert=%v}",
		opts.HostPort, opts.Namespace, tc.ServerName, tc.RootCAs != nil, len(tc.Certificates) > 0 || tc.GetClientCertificate != nil)

	c.TemporalTLSClientKeyPath = filepath.Join(dir, "missing.key")
	if _, err := c.TemporalClientOptions(); err == nil {
		t.Error("a missing client key file was accepted")
	}
}

// The RocketMQ TLS settings, from the environment, become the client's TLS
// configuration; without ROCKETMQ_TLS there is none.
func TestRocketMQTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	parse := func(env map[string]string) *Config {
		t.Helper()
		c := new(Config)
		s := NewSet("t", "Usage: t", &bytes.Buffer{})
		c.RegisterRocketMQ(s)
		if err := s.Parse(nil, lookupOf(env)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if tc, err := parse(nil).RocketMQTLSConfig(); tc != nil || err != nil {
		t.Fatalf("defaults: %v, %v, want plain TCP", tc, err)
	}
	if tc, err := parse(map[string]string{"ROCKETMQ_TLS": "true"}).RocketMQTLSConfig(); err != nil || tc == nil ||
		tc.RootCAs != nil || len(tc.Certificates) != 0 || tc.ServerName != "" {
		t.Fatalf("ROCKETMQ_TLS=true alone: %+v, %v, want TLS with the system roots", tc, err)
	}
	tc, err := parse(map[string]string{"ROCKETMQ_TLS": "true", "ROCKETMQ_TLS_CA_FILE": cert, "ROCKETMQ_TLS_SERVER_NAME": "broker.test",
		"ROCKETMQ_TLS_CERT_FILE": cert, "ROCKETMQ_TLS_KEY_FILE": key}).RocketMQTLSConfig()
	if err != nil || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "broker.test" || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("every setting: %+v, %v", tc, err)
	}

	notPEM := filepath.Join(dir, "not.pem")
	keyText := "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-looks-like-a-key"
	if err := os.WriteFile(notPEM, []byte(keyText), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"ROCKETMQ_TLS_CA_FILE": cert}, []string{"ROCKETMQ_TLS_CA_FILE is set but ROCKETMQ_TLS is not true"}},
		{map[string]string{"ROCKETMQ_TLS": "false", "ROCKETMQ_TLS_KEY_FILE": key}, []string{"ROCKETMQ_TLS_KEY_FILE is set"}},
		{map[string]string{"ROCKETMQ_TLS": "true", "ROCKETMQ_TLS_CA_FILE": filepath.Join(dir, "missing.pem")}, []string{"ROCKETMQ_TLS_CA_FILE", "missing.pem"}},
		{map[string]string{"ROCKETMQ_TLS": "true", "ROCKETMQ_TLS_CA_FILE": notPEM}, []string{"ROCKETMQ_TLS_CA_FILE", "holds no PEM certificate"}},
		{map[string]string{"ROCKETMQ_TLS": "true", "ROCKETMQ_TLS_CERT_FILE": cert}, []string{"ROCKETMQ_TLS_CERT_FILE and ROCKETMQ_TLS_KEY_FILE go together"}},
		{map[string]string{"ROCKETMQ_TLS": "true", "ROCKETMQ_TLS_CERT_FILE": cert, "ROCKETMQ_TLS_KEY_FILE": notPEM}, []string{"ROCKETMQ_TLS_KEY_FILE", "not a matching PEM certificate and key"}},
		{map[string]string{"ROCKETMQ_TLS": "true", "ROCKETMQ_TLS_CERT_FILE": key, "ROCKETMQ_TLS_KEY_FILE": cert}, []string{"ROCKETMQ_TLS_CERT_FILE", "not a matching"}},
	} {
		_, err := parse(c.env).RocketMQTLSConfig()
		if err == nil {
			t.Errorf("%v: accepted", c.env)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want %q", c.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "looks-like-a-key") || strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%v: the error shows a file's contents: %v", c.env, err)
		}
		t.Logf("%v: %v", c.env, err)
	}
	var c Config
	s := NewSet("t", "Usage: t", &bytes.Buffer{})
	c.RegisterRocketMQ(s)
	if err := s.Parse(nil, lookupOf(map[string]string{"ROCKETMQ_TLS": "yes please"})); err == nil || !strings.Contains(err.Error(), "ROCKETMQ_TLS") {
		t.Errorf("ROCKETMQ_TLS=yes please: %v", err)
	}
}

// TestTemporalGRPCCompression: none by default (not the SDK's gzip), gzip
// on request, anything else refused with the variable's name.
func TestTemporalGRPCCompression(t *testing.T) {
	dir := t.TempDir()
	for v, want := range map[string]client.GrpcCompression{"": &client.GrpcCompressionNone{},
		GRPCCompressionGzip: &client.GrpcCompressionGzip{}, GRPCCompressionNone: &client.GrpcCompressionNone{}} {
		opts, err := (&Config{TemporalConfigFile: dir + "/none.toml", TemporalGRPCCompression: v}).TemporalClientOptions()
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if reflect.TypeOf(opts.ConnectionOptions.GrpcCompression) != reflect.TypeOf(want) {
			t.Errorf("%q: compression %T, want %T", v, opts.ConnectionOptions.GrpcCompression, want)
		}
	}
	_, err := (&Config{TemporalConfigFile: dir + "/none.toml", TemporalGRPCCompression: "zstd"}).TemporalClientOptions()
	if err == nil || !strings.Contains(err.Error(), "ORDERFLOW_TEMPORAL_GRPC_COMPRESSION") {
		t.Errorf("zstd: %v, want an error naming the variable", err)
	}
}
