package config

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// Defaults of the shared settings.
const (
	DefaultTemporalAddress   = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
	DefaultDatabaseURL       = "postgres://orderflow:orderflow@127.0.0.1:5432/orderflow?sslmode=disable"
	DefaultRocketMQNamesrv   = "127.0.0.1:9876"
	DefaultTopic             = "ORDER_EVENTS"
	DefaultConsumerGroup     = "orderflow-bridge"
	DefaultLogLevel          = "info"
	DefaultTemporalUI        = "http://127.0.0.1:8233"
	DefaultGapWindow         = 5 * time.Minute
	// DefaultGapSeries is how many producers get series of their own in
	// the suspected-loss metrics.
	DefaultGapSeries = 20
	// DefaultTaskQueue is the task queue of OrderWorkflow and its
	// activities unless configured otherwise (ORDERFLOW_TASK_QUEUE).
	DefaultTaskQueue = "orderflow"
	// DefaultRedisURL is the local stack's Redis (scripts/stack.sh).
	DefaultRedisURL = "redis://127.0.0.1:6379/0"
	// RedisOff as REDIS_URL turns Redis off, like the flag -redis-url= does.
	RedisOff = "off"
)

// Config is the configuration shared by orderflow's processes. Each binary
// registers the parts it uses (RegisterTemporal, RegisterDatabase, ...).
type Config struct {
	// Temporal: address, namespace and, for clusters that need them, an API
	// key and TLS files. Settings left empty come from the Temporal
	// environment configuration's profile (TEMPORAL_CONFIG_FILE,
	// TEMPORAL_PROFILE), then from the defaults.
	TemporalAddress             string
	TemporalNamespace           string
	TemporalAPIKey              string
	TemporalTLS                 string
	TemporalTLSClientCertPath   string
	TemporalTLSClientKeyPath    string
	TemporalTLSServerCACertPath string
	TemporalTLSServerName       string
	TemporalProfile             string
	TemporalConfigFile          string
	// TemporalGRPCCompression compresses the requests to Temporal:
	// GRPCCompressionNone (the default: CPU on both ends for small
	// messages) or GRPCCompressionGzip (the SDK's own default).
	TemporalGRPCCompression string
	// TaskQueue is the task queue of OrderWorkflow.
	TaskQueue string
	// DatabaseURL is the PostgreSQL connection URL; TLS as its sslmode says.
	DatabaseURL string
	// RocketMQ: name servers and, for brokers with ACL, the access and
	// secret keys; TLS to the name servers and the brokers when
	// RocketMQTLS is set (see RocketMQTLSConfig).
	RocketMQNamesrv       string
	RocketMQAccessKey     string
	RocketMQSecretKey     string
	RocketMQTLS           bool
	RocketMQTLSCAFile     string
	RocketMQTLSServerName string
	RocketMQTLSCertFile   string
	RocketMQTLSKeyFile    string
	// Topic is the topic of order events; ConsumerGroup the bridge's group.
	Topic         string
	ConsumerGroup string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// TemporalUI is the base URL of the Temporal UI, for links to an
	// order's workflow.
	TemporalUI string
	// GapWindow is how long a hole in a producer's sequence stays open
	// before it counts as a suspected loss.
	GapWindow time.Duration
	// GapSeries bounds the producers that get series of their own in the
	// suspected-loss metrics: those with the most missing messages.
	GapSeries int
	// GapProducers is the comma-separated allow-list of the producer IDs
	// whose suspected losses alert; empty, every producer's do. See
	// GapProducerIDs.
	GapProducers string
	// RedisURL is the Redis the bridges share as their duplicate filter's
	// middle tier (redis://, or rediss:// for TLS); empty turns that tier
	// off (RedisOff as a value, since an empty variable counts as unset).
	RedisURL string
}

// The shared settings.
var (
	TemporalAddress = Setting{Flag: "temporal-address", Env: "TEMPORAL_ADDRESS",
		Usage: "Temporal frontend host:port (default " + DefaultTemporalAddress + ", or the profile's)"}
	TemporalNamespace = Setting{Flag: "temporal-namespace", Env: "TEMPORAL_NAMESPACE",
		Usage: "Temporal namespace (default " + DefaultTemporalNamespace + ", or the profile's)"}
	TemporalAPIKey = Setting{Flag: "temporal-api-key", Env: "TEMPORAL_API_KEY",
		Usage: "API key for Temporal Cloud or a cluster that requires one (turns TLS on)", Secret: true}
	TemporalTLS = Setting{Flag: "temporal-tls", Env: "TEMPORAL_TLS",
		Usage: "true to connect to Temporal over TLS, false to force plain TCP (empty: TLS when an API key or TLS file is set)"}
	TemporalTLSClientCertPath = Setting{Flag: "temporal-tls-client-cert-path", Env: "TEMPORAL_TLS_CLIENT_CERT_PATH",
		Usage: "client certificate (PEM) for mTLS to Temporal"}
	TemporalTLSClientKeyPath = Setting{Flag: "temporal-tls-client-key-path", Env: "TEMPORAL_TLS_CLIENT_KEY_PATH",
		Usage: "client key (PEM) for mTLS to Temporal"}
	TemporalTLSServerCACertPath = Setting{Flag: "temporal-tls-server-ca-cert-path", Env: "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
		Usage: "CA certificate (PEM) that signed the Temporal frontend's certificate"}
	TemporalTLSServerName = Setting{Flag: "temporal-tls-server-name", Env: "TEMPORAL_TLS_SERVER_NAME",
		Usage: "server name to verify on the Temporal frontend's certificate"}
	TemporalProfile = Setting{Flag: "temporal-profile", Env: "TEMPORAL_PROFILE",
		Usage: "profile of the Temporal environment configuration file to use"}
	TemporalConfigFile = Setting{Flag: "temporal-config-file", Env: "TEMPORAL_CONFIG_FILE",
		Usage: "Temporal environment configuration file (TOML; default: the user's temporalio/temporal.toml)"}
	TemporalGRPCCompression = Setting{Flag: "temporal-grpc-compression", Env: "ORDERFLOW_TEMPORAL_GRPC_COMPRESSION",
		Usage: "compression of the gRPC requests to Temporal: " + GRPCCompressionGzip + " or " + GRPCCompressionNone}
	TaskQueue   = Setting{Flag: "task-queue", Env: "ORDERFLOW_TASK_QUEUE", Usage: "Temporal task queue of OrderWorkflow"}
	DatabaseURL = Setting{Flag: "database-url", Env: "DATABASE_URL",
		Usage: "PostgreSQL connection URL (sslmode=require or verify-full for TLS)", Secret: true}
	RocketMQNamesrv = Setting{Flag: "rocketmq-namesrv", Env: "ROCKETMQ_NAMESRV",
		Usage: "RocketMQ name server host:port (comma-separated for several)"}
	RocketMQAccessKey = Setting{Flag: "rocketmq-access-key", Env: "ROCKETMQ_ACCESS_KEY",
		Usage: "RocketMQ ACL access key (empty: no ACL)"}
	RocketMQSecretKey = Setting{Flag: "rocketmq-secret-key", Env: "ROCKETMQ_SECRET_KEY",
		Usage: "RocketMQ ACL secret key", Secret: true}
	RocketMQTLS = Setting{Flag: "rocketmq-tls", Env: "ROCKETMQ_TLS",
		Usage: "true to connect to the RocketMQ name servers and brokers over TLS (false: plain TCP, clear text)"}
	RocketMQTLSCAFile = Setting{Flag: "rocketmq-tls-ca-file", Env: "ROCKETMQ_TLS_CA_FILE",
		Usage: "CA certificates (PEM) that signed the RocketMQ name servers' and brokers' certificates (empty: the system's roots)"}
	RocketMQTLSServerName = Setting{Flag: "rocketmq-tls-server-name", Env: "ROCKETMQ_TLS_SERVER_NAME",
		Usage: "name to verify on every RocketMQ server certificate (empty: the address dialled, an IP address for brokers)"}
	RocketMQTLSCertFile = Setting{Flag: "rocketmq-tls-cert-file", Env: "ROCKETMQ_TLS_CERT_FILE",
		Usage: "client certificate (PEM) for mTLS to RocketMQ, with -rocketmq-tls-key-file"}
	RocketMQTLSKeyFile = Setting{Flag: "rocketmq-tls-key-file", Env: "ROCKETMQ_TLS_KEY_FILE",
		Usage: "client key (PEM) for mTLS to RocketMQ, with -rocketmq-tls-cert-file"}
	Topic         = Setting{Flag: "topic", Env: "ORDERFLOW_TOPIC", Usage: "RocketMQ topic of order events"}
	ConsumerGroup = Setting{Flag: "consumer-group", Env: "ORDERFLOW_CONSUMER_GROUP", Usage: "RocketMQ consumer group of the bridge"}
	LogLevel      = Setting{Flag: "log-level", Env: "ORDERFLOW_LOG_LEVEL", Usage: "log level: debug, info, warn or error"}
	TemporalUI    = Setting{Flag: "temporal-ui", Env: "TEMPORAL_UI", Usage: "base URL of the Temporal UI, for links to an order's workflow"}
	GapWindow     = Setting{Flag: "gap-window", Env: "ORDERFLOW_GAP_WINDOW",
		Usage: "how long a hole in a producer's sequence stays open before it counts as a suspected loss"}
	GapSeries = Setting{Flag: "gap-series", Env: "ORDERFLOW_GAP_SERIES",
		Usage: "how many producers with suspected losses (those missing the most messages) get series of their own in /metrics; the totals count every producer"}
	GapProducers = Setting{Flag: "gap-producers", Env: "ORDERFLOW_GAP_PRODUCERS",
		Usage: "comma-separated producer IDs whose suspected losses alert (empty: every producer's); the others' are counted apart, in the unwatched totals"}
	RedisURL = Setting{Flag: "redis-url", Env: "REDIS_URL",
		Usage: "Redis URL of the duplicate filter the bridges share (rediss:// for TLS; off, or the flag empty: no Redis, the filter asks the ledger)", Secret: true}
)

// Defaults returns the configuration with every default.
func Defaults() Config {
	return Config{
		TemporalAddress:   DefaultTemporalAddress,
		TemporalNamespace: DefaultTemporalNamespace,
		TaskQueue:         DefaultTaskQueue,
		DatabaseURL:       DefaultDatabaseURL,
		RocketMQNamesrv:   DefaultRocketMQNamesrv,
		Topic:             DefaultTopic,
		ConsumerGroup:     DefaultConsumerGroup,
		LogLevel:          DefaultLogLevel,
		GapWindow:         DefaultGapWindow,
		GapSeries:         DefaultGapSeries,
		RedisURL:          DefaultRedisURL,
	}
}

// FromEnv returns the defaults overridden by the environment, for tests and
// tools that take no flags.
func FromEnv() Config {
	var c Config
	s := NewSet("env", "", os.Stderr)
	c.RegisterTemporal(s)
	c.RegisterDatabase(s)
	c.RegisterRocketMQ(s)
	c.RegisterConsumerGroup(s)
	c.RegisterLog(s)
	c.RegisterRedis(s)
	_ = s.Parse(nil, nil)
	c.NormalizeRedis()
	if c.TemporalAddress == "" {
		c.TemporalAddress = DefaultTemporalAddress
	}
	if c.TemporalNamespace == "" {
		c.TemporalNamespace = DefaultTemporalNamespace
	}
	return c
}

// RegisterTemporal registers the Temporal settings and the task queue.
func (c *Config) RegisterTemporal(s *Set) {
	s.String(&c.TemporalAddress, "", TemporalAddress)
	s.String(&c.TemporalNamespace, "", TemporalNamespace)
	s.String(&c.TemporalAPIKey, "", TemporalAPIKey)
	s.String(&c.TemporalTLS, "", TemporalTLS)
	s.String(&c.TemporalTLSClientCertPath, "", TemporalTLSClientCertPath)
	s.String(&c.TemporalTLSClientKeyPath, "", TemporalTLSClientKeyPath)
	s.String(&c.TemporalTLSServerCACertPath, "", TemporalTLSServerCACertPath)
	s.String(&c.TemporalTLSServerName, "", TemporalTLSServerName)
	s.String(&c.TemporalProfile, "", TemporalProfile)
	s.String(&c.TemporalConfigFile, "", TemporalConfigFile)
	s.String(&c.TemporalGRPCCompression, DefaultGRPCCompression, TemporalGRPCCompression)
	s.String(&c.TaskQueue, DefaultTaskQueue, TaskQueue)
}

// RegisterDatabase registers DATABASE_URL.
func (c *Config) RegisterDatabase(s *Set) {
	s.String(&c.DatabaseURL, DefaultDatabaseURL, DatabaseURL)
}

// RegisterRocketMQ registers the name servers, the ACL keys, the TLS
// settings and the topic. After Parse, RocketMQTLSConfig builds the TLS
// configuration.
func (c *Config) RegisterRocketMQ(s *Set) {
	s.String(&c.RocketMQNamesrv, DefaultRocketMQNamesrv, RocketMQNamesrv)
	s.String(&c.RocketMQAccessKey, "", RocketMQAccessKey)
	s.String(&c.RocketMQSecretKey, "", RocketMQSecretKey)
	s.Bool(&c.RocketMQTLS, false, RocketMQTLS)
	s.String(&c.RocketMQTLSCAFile, "", RocketMQTLSCAFile)
	s.String(&c.RocketMQTLSServerName, "", RocketMQTLSServerName)
	s.String(&c.RocketMQTLSCertFile, "", RocketMQTLSCertFile)
	s.String(&c.RocketMQTLSKeyFile, "", RocketMQTLSKeyFile)
	s.String(&c.Topic, DefaultTopic, Topic)
}

// RocketMQTLSConfig returns the TLS configuration of the connections to
// the RocketMQ name servers and brokers: nil (plain TCP) unless
// RocketMQTLS is set. It reads the CA file and the client certificate and
// key; an error names the setting and the file, never their contents. A
// TLS file set while RocketMQTLS is not is an error too, so that a link
// meant to be encrypted is never silently clear text.
func (c *Config) RocketMQTLSConfig() (*tls.Config, error) {
	if !c.RocketMQTLS {
		for _, f := range []struct {
			st Setting
			v  string
		}{{RocketMQTLSCAFile, c.RocketMQTLSCAFile}, {RocketMQTLSServerName, c.RocketMQTLSServerName},
			{RocketMQTLSCertFile, c.RocketMQTLSCertFile}, {RocketMQTLSKeyFile, c.RocketMQTLSKeyFile}} {
			if f.v != "" {
				return nil, fmt.Errorf("%s is set but %s is not true: set %s=true to connect to RocketMQ over TLS",
					f.st.Env, RocketMQTLS.Env, RocketMQTLS.Env)
			}
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.RocketMQTLSServerName}
	if c.RocketMQTLSCAFile != "" {
		pem, err := os.ReadFile(c.RocketMQTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", RocketMQTLSCAFile.Env, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", RocketMQTLSCAFile.Env, c.RocketMQTLSCAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.RocketMQTLSCertFile == "" && c.RocketMQTLSKeyFile == "":
	case c.RocketMQTLSCertFile == "" || c.RocketMQTLSKeyFile == "":
		return nil, fmt.Errorf("%s and %s go together: set both for a client certificate, or neither",
			RocketMQTLSCertFile.Env, RocketMQTLSKeyFile.Env)
	default:
		certPEM, err := os.ReadFile(c.RocketMQTLSCertFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", RocketMQTLSCertFile.Env, err)
		}
		keyPEM, err := os.ReadFile(c.RocketMQTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", RocketMQTLSKeyFile.Env, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// crypto/tls's errors name what is wrong (no PEM data, a
			// certificate where the key should be, a key that does not
			// match), not the bytes.
			return nil, fmt.Errorf("%s %s and %s %s: not a matching PEM certificate and key: %w",
				RocketMQTLSCertFile.Env, c.RocketMQTLSCertFile, RocketMQTLSKeyFile.Env, c.RocketMQTLSKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// RegisterConsumerGroup registers the bridge's consumer group.
func (c *Config) RegisterConsumerGroup(s *Set) {
	s.String(&c.ConsumerGroup, DefaultConsumerGroup, ConsumerGroup)
}

// RegisterGapWindow registers the window of loss detection.
func (c *Config) RegisterGapWindow(s *Set) {
	s.Duration(&c.GapWindow, DefaultGapWindow, GapWindow)
}

// RegisterGapMetrics registers how the bridge exports suspected losses:
// the bound on per-producer series and the allow-list of the producers
// that alert.
func (c *Config) RegisterGapMetrics(s *Set) {
	s.Int(&c.GapSeries, DefaultGapSeries, GapSeries)
	s.String(&c.GapProducers, "", GapProducers)
}

// GapProducerIDs is GapProducers as a list: split at commas, spaces
// trimmed, empty entries and repeats dropped; nil when no producer is
// listed.
func (c *Config) GapProducerIDs() []string {
	var ids []string
	seen := map[string]bool{}
	for _, id := range strings.Split(c.GapProducers, ",") {
		if id = strings.TrimSpace(id); id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// RegisterLog registers the log level.
func (c *Config) RegisterLog(s *Set) {
	s.String(&c.LogLevel, DefaultLogLevel, LogLevel)
}

// RegisterTemporalUI registers the base URL of the Temporal UI.
func (c *Config) RegisterTemporalUI(s *Set) {
	s.String(&c.TemporalUI, DefaultTemporalUI, TemporalUI)
}

// WorkflowURL is the Temporal UI's page of the workflow id in namespace.
func (c *Config) WorkflowURL(namespace, id string) string {
	return strings.TrimRight(c.TemporalUI, "/") + "/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(id)
}

// RegisterRedis registers the Redis URL of the duplicate filter. After
// Parse, call NormalizeRedis.
func (c *Config) RegisterRedis(s *Set) {
	s.String(&c.RedisURL, DefaultRedisURL, RedisURL)
}

// NormalizeRedis turns RedisOff into the empty URL: no Redis.
func (c *Config) NormalizeRedis() {
	if c.RedisURL == RedisOff {
		c.RedisURL = ""
	}
}

// temporalEnv maps the Temporal environment configuration's variables to
// the settings that hold them.
func (c *Config) temporalEnv() map[string]string {
	return map[string]string{
		TemporalAddress.Env:             c.TemporalAddress,
		TemporalNamespace.Env:           c.TemporalNamespace,
		TemporalAPIKey.Env:              c.TemporalAPIKey,
		TemporalTLS.Env:                 c.TemporalTLS,
		TemporalTLSClientCertPath.Env:   c.TemporalTLSClientCertPath,
		TemporalTLSClientKeyPath.Env:    c.TemporalTLSClientKeyPath,
		TemporalTLSServerCACertPath.Env: c.TemporalTLSServerCACertPath,
		TemporalTLSServerName.Env:       c.TemporalTLSServerName,
		TemporalProfile.Env:             c.TemporalProfile,
		TemporalConfigFile.Env:          c.TemporalConfigFile,
	}
}

// settingsLookup is an envconfig.EnvLookup that answers with the settings
// (flag or variable) and falls back to the process environment for the
// variables orderflow does not list (TEMPORAL_GRPC_META_*, *_DATA, ...).
type settingsLookup map[string]string

func (l settingsLookup) Environ() []string { return os.Environ() }

func (l settingsLookup) LookupEnv(key string) (string, bool) {
	if v, ok := l[key]; ok {
		return v, v != ""
	}
	return os.LookupEnv(key)
}

// TemporalClientOptions returns the Temporal client options: the SDK's
// environment configuration (config file profile, then TEMPORAL_*
// variables) with the settings' values, then the defaults for the address
// and the namespace. The caller adds its logger and metrics handler.
func (c *Config) TemporalClientOptions() (client.Options, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: settingsLookup(c.temporalEnv())})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client configuration: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultTemporalAddress
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultTemporalNamespace
	}
	switch cmp.Or(c.TemporalGRPCCompression, DefaultGRPCCompression) {
	case GRPCCompressionGzip:
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionGzip{}
	case GRPCCompressionNone:
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	default:
		return client.Options{}, fmt.Errorf("%s: %q is neither %s nor %s",
			TemporalGRPCCompression.Env, c.TemporalGRPCCompression, GRPCCompressionGzip, GRPCCompressionNone)
	}
	return opts, nil
}

// The values of TemporalGRPCCompression.
const (
	GRPCCompressionGzip    = "gzip"
	GRPCCompressionNone    = "none"
	DefaultGRPCCompression = GRPCCompressionNone
)

// CoreSetting is a setting of the configuration table with its default.
type CoreSetting struct {
	Setting
	Default string
}

// Core is the settings that every process of a deployment shares, with
// their defaults (docs/configuration.md lists them as "Shared settings").
func Core() []CoreSetting {
	return []CoreSetting{
		{TemporalAddress, DefaultTemporalAddress},
		{TemporalNamespace, DefaultTemporalNamespace},
		{TaskQueue, DefaultTaskQueue},
		{DatabaseURL, DefaultDatabaseURL},
		{RocketMQNamesrv, DefaultRocketMQNamesrv},
		{Topic, DefaultTopic},
		{ConsumerGroup, DefaultConsumerGroup},
	}
}
