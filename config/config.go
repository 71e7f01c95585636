// Package config holds orderflow's process configuration: every setting is
// read from an environment variable and can be overridden by a flag of the
// same meaning, with the defaults of DESIGN.md.
package config

import (
	"flag"
	"os"
)

// Config is the configuration shared by the worker and the bridge.
type Config struct {
	TemporalAddress   string
	TemporalNamespace string
	TaskQueue         string
	DatabaseURL       string
	RocketMQNamesrv   string
	Topic             string
	ConsumerGroup     string
}

// Setting describes one configuration value: its environment variable, its
// flag and its default.
type Setting struct {
	Env     string
	Flag    string
	Default string
	Usage   string
	field   func(*Config) *string
}

// Settings lists every setting, in the order of DESIGN.md.
var Settings = []Setting{
	{"TEMPORAL_ADDRESS", "temporal-address", "127.0.0.1:7233", "Temporal frontend host:port", func(c *Config) *string { return &c.TemporalAddress }},
	{"TEMPORAL_NAMESPACE", "temporal-namespace", "default", "Temporal namespace", func(c *Config) *string { return &c.TemporalNamespace }},
	{"ORDERFLOW_TASK_QUEUE", "task-queue", "orderflow", "Temporal task queue of OrderWorkflow", func(c *Config) *string { return &c.TaskQueue }},
	{"DATABASE_URL", "database-url", "postgres://orderflow:orderflow@127.0.0.1:5432/orderflow?sslmode=disable", "PostgreSQL connection URL", func(c *Config) *string { return &c.DatabaseURL }},
	{"ROCKETMQ_NAMESRV", "rocketmq-namesrv", "127.0.0.1:9876", "RocketMQ name server host:port (comma-separated for several)", func(c *Config) *string { return &c.RocketMQNamesrv }},
	{"ORDERFLOW_TOPIC", "topic", "ORDER_EVENTS", "RocketMQ topic of order events", func(c *Config) *string { return &c.Topic }},
	{"ORDERFLOW_CONSUMER_GROUP", "consumer-group", "orderflow-bridge", "RocketMQ consumer group of the bridge", func(c *Config) *string { return &c.ConsumerGroup }},
}

// Defaults returns the configuration with every default of DESIGN.md.
func Defaults() Config {
	var c Config
	for _, s := range Settings {
		*s.field(&c) = s.Default
	}
	return c
}

// FromEnv returns the defaults overridden by any set environment variable.
func FromEnv() Config { return fromLookup(os.LookupEnv) }

func fromLookup(lookup func(string) (string, bool)) Config {
	c := Defaults()
	for _, s := range Settings {
		if v, ok := lookup(s.Env); ok && v != "" {
			*s.field(&c) = v
		}
	}
	return c
}

// RegisterFlags registers one flag per setting on fs, writing into c. Call it
// on a Config from FromEnv so that flags override the environment, which
// overrides the defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, s := range Settings {
		p := s.field(c)
		fs.StringVar(p, s.Flag, *p, s.Usage+" (env "+s.Env+")")
	}
}
