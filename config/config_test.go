package config

import (
	"flag"
	"testing"
)

func TestPrecedence(t *testing.T) {
	env := map[string]string{"TEMPORAL_NAMESPACE": "prod", "ORDERFLOW_TOPIC": ""}
	c := fromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if c.TemporalNamespace != "prod" {
		t.Fatalf("env not applied: %q", c.TemporalNamespace)
	}
	if c.Topic != "ORDER_EVENTS" {
		t.Fatalf("empty env must keep the default, got %q", c.Topic)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-temporal-namespace=staging", "-consumer-group=g2"}); err != nil {
		t.Fatal(err)
	}
	if c.TemporalNamespace != "staging" || c.ConsumerGroup != "g2" {
		t.Fatalf("flags not applied: %+v", c)
	}
	if c.TaskQueue != "orderflow" || c.TemporalAddress != "127.0.0.1:7233" || c.RocketMQNamesrv != "127.0.0.1:9876" {
		t.Fatalf("defaults changed: %+v", c)
	}
}
