package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		on       bool
		protocol string
		err      string
	}{
		{name: "nothing set", env: nil},
		{name: "empty endpoint counts as unset", env: map[string]string{EnvEndpoint: " "}},
		{name: "endpoint", env: map[string]string{EnvEndpoint: "http://collector:4318"}, on: true, protocol: ProtocolHTTP},
		{name: "traces endpoint", env: map[string]string{EnvTracesEndpoint: "http://collector:4318/v1/traces"}, on: true, protocol: ProtocolHTTP},
		{name: "grpc", env: map[string]string{EnvEndpoint: "http://collector:4317", EnvProtocol: "grpc"}, on: true, protocol: ProtocolGRPC},
		{name: "traces protocol wins", env: map[string]string{EnvEndpoint: "x", EnvProtocol: "grpc", EnvTracesProtocol: "http/protobuf"},
			on: true, protocol: ProtocolHTTP},
		{name: "exporter otlp alone", env: map[string]string{EnvTracesExporter: "otlp"}, on: true, protocol: ProtocolHTTP},
		{name: "exporter none beats the endpoint", env: map[string]string{EnvTracesExporter: "none", EnvEndpoint: "http://collector:4318"}},
		{name: "sdk disabled", env: map[string]string{EnvSDKDisabled: "true", EnvTracesExporter: "otlp"}},
		{name: "sdk disabled false", env: map[string]string{EnvSDKDisabled: "false", EnvEndpoint: "x"}, on: true, protocol: ProtocolHTTP},
		{name: "other exporter", env: map[string]string{EnvTracesExporter: "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "json protocol", env: map[string]string{EnvEndpoint: "x", EnvProtocol: "http/json"}, err: `"http/json"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := FromEnv(lookupIn(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("FromEnv = %+v, %v; want an error naming %s", s, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.On != c.on || s.Protocol != c.protocol || s.Why == "" {
				t.Fatalf("FromEnv = %+v, want on=%v protocol=%q and a reason", s, c.on, c.protocol)
			}
		})
	}
}

// clearOTEL unsets every OTEL_* variable for the test.
func clearOTEL(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, v) // restored after the test
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOffByDefault: without OTEL_* variables no exporter is made, the
// global tracer provider stays the no-op one, and nothing is added to the
// Temporal client or the database connections.
func TestOffByDefault(t *testing.T) {
	clearOTEL(t)
	before := otel.GetTracerProvider()
	var logs bytes.Buffer
	tr, err := Start(context.Background(), "orderflow-test", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if tr.On() || tr.tp != nil {
		t.Fatal("tracing is on without any OTEL_* variable")
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("the global tracer provider changed")
	}
	if _, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider); sdk {
		t.Fatal("the global tracer provider is the SDK's")
	}
	ics, err := tr.TemporalInterceptors()
	if err != nil || ics != nil {
		t.Fatalf("TemporalInterceptors = %v, %v; want none", ics, err)
	}
	if q := tr.QueryTracer(); q != nil {
		t.Fatalf("QueryTracer = %v, want nil", q)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "tracing off") {
		t.Fatalf("no start-up line saying tracing is off: %s", logs.String())
	}
}

// TestOnSetsTheGlobalProvider: with an endpoint, Start makes the SDK's
// provider the global one and hands out the interceptor and the SQL
// tracer; nothing is contacted until a span is exported, and Shutdown with
// no spans returns at once.
func TestOnSetsTheGlobalProvider(t *testing.T) {
	clearOTEL(t)
	t.Setenv(EnvEndpoint, "http://127.0.0.1:9") // discard: never dialled without spans
	t.Setenv(EnvServiceName, "renamed")
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	var logs bytes.Buffer
	tr, err := Start(context.Background(), "orderflow-test", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.On() || otel.GetTracerProvider() != tr.tp {
		t.Fatal("tracing is not on, or its provider is not the global one")
	}
	if ics, err := tr.TemporalInterceptors(); err != nil || len(ics) != 1 {
		t.Fatalf("TemporalInterceptors = %v, %v; want one", ics, err)
	}
	if tr.QueryTracer() == nil {
		t.Fatal("no SQL tracer")
	}
	if !strings.Contains(logs.String(), "service=renamed") || !strings.Contains(logs.String(), "protocol=http/protobuf") {
		t.Fatalf("start-up line does not name the service from OTEL_SERVICE_NAME and the protocol: %s", logs.String())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
