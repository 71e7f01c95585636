// Package tracing sets up OpenTelemetry tracing for orderflow's processes:
// a tracer provider exporting spans over OTLP, configured by the standard
// OTEL_* environment variables and off unless they ask for it; the Temporal
// SDK's tracing interceptor, which carries a trace through SignalWithStart
// into the workflow and its activities; and a pgx query tracer, which makes
// every SQL statement run under a span a span of its own.
//
// Tracing is on when OTEL_TRACES_EXPORTER is "otlp", or when it is unset or
// empty and OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set. It is off otherwise, and always when OTEL_SDK_DISABLED is "true"
// or OTEL_TRACES_EXPORTER is "none": then no exporter is made, nothing is
// contacted and the global tracer provider stays OpenTelemetry's no-op one.
// The exporter's own settings (endpoint, headers, TLS, timeout,
// compression) and the batch span processor's and the sampler's are the
// standard variables too, read by the OpenTelemetry SDK.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// The standard variables that decide whether spans are exported, and how.
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// OTLP transports.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Settings is what the environment says about exporting spans.
type Settings struct {
	// On is true when spans are exported.
	On bool
	// Protocol is the OTLP transport, ProtocolGRPC or ProtocolHTTP (the
	// specification's default); set only when On.
	Protocol string
	// Why names the variable that decided, for the start-up log line.
	Why string
}

// FromEnv reads the rule of the package documentation from the variables
// lookup returns (os.LookupEnv in the processes). An empty variable counts
// as unset. A value orderflow cannot honour is an error.
func FromEnv(lookup func(string) (string, bool)) (Settings, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(get(EnvSDKDisabled), "true") {
		return Settings{Why: EnvSDKDisabled + "=true"}, nil
	}
	var s Settings
	switch exp := strings.ToLower(get(EnvTracesExporter)); exp {
	case "none":
		return Settings{Why: EnvTracesExporter + "=none"}, nil
	case "otlp":
		s = Settings{On: true, Why: EnvTracesExporter + "=otlp"}
	case "":
		switch {
		case get(EnvTracesEndpoint) != "":
			s = Settings{On: true, Why: EnvTracesEndpoint + " is set"}
		case get(EnvEndpoint) != "":
			s = Settings{On: true, Why: EnvEndpoint + " is set"}
		default:
			return Settings{Why: "no " + EnvEndpoint + ", " + EnvTracesEndpoint + " or " + EnvTracesExporter}, nil
		}
	default:
		return Settings{}, fmt.Errorf("%s=%q: orderflow exports traces with otlp only (or none)", EnvTracesExporter, exp)
	}
	p := get(EnvTracesProtocol)
	if p == "" {
		p = get(EnvProtocol)
	}
	switch p {
	case "", ProtocolHTTP:
		s.Protocol = ProtocolHTTP
	case ProtocolGRPC:
		s.Protocol = ProtocolGRPC
	default:
		return Settings{}, fmt.Errorf("OTLP protocol %q: orderflow exports traces over %s or %s", p, ProtocolGRPC, ProtocolHTTP)
	}
	return s, nil
}

// Tracing is a process's tracing: a tracer provider exporting over OTLP,
// or nothing at all. The zero value and nil are off.
type Tracing struct {
	settings Settings
	tp       *sdktrace.TracerProvider
}

// Start sets tracing up for the process named service (its service.name
// unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another) as the
// environment says (FromEnv). When on, the provider becomes OpenTelemetry's
// global one, with the W3C trace context and baggage propagators, and export
// errors are logged to log. Nothing is contacted before the first export.
// Call Shutdown before the process exits, to flush the spans.
func Start(ctx context.Context, service string, log *slog.Logger) (*Tracing, error) {
	s, err := FromEnv(os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if !s.On {
		log.Info("tracing off", "why", s.Why)
		return &Tracing{settings: s}, nil
	}
	var exp sdktrace.SpanExporter
	if s.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (%s): %w", s.Protocol, err)
	}
	// Later sources win: the environment over the process's default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "err", err)
	}))
	log.Info("tracing on: exporting spans over OTLP", "why", s.Why, "protocol", s.Protocol,
		"service", serviceName(res, service))
	return &Tracing{settings: s, tp: tp}, nil
}

// serviceName is the service.name of res, or def.
func serviceName(res *resource.Resource, def string) string {
	if res != nil {
		if v, ok := res.Set().Value("service.name"); ok {
			return v.AsString()
		}
	}
	return def
}

// On reports whether spans are exported.
func (t *Tracing) On() bool { return t != nil && t.tp != nil }

// Settings is what the environment said.
func (t *Tracing) Settings() Settings {
	if t == nil {
		return Settings{}
	}
	return t.settings
}

// TemporalInterceptors returns the Temporal client interceptors that trace
// the client's calls (SignalWithStart) and, for a worker made from the
// client, its workflows and activities, local ones included, carrying the
// trace context in Temporal headers. None when tracing is off, so that
// nothing is added to the headers.
func (t *Tracing) TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !t.On() {
		return nil, nil
	}
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: t.tp.Tracer("go.temporal.io/sdk/contrib/opentelemetry"),
	})
	if err != nil {
		return nil, fmt.Errorf("tracing: temporal interceptor: %w", err)
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// QueryTracer returns the pgx tracer that makes each SQL statement run
// under a span a child span, "query <operation>" (with "prepare
// <operation>" under it when pgx prepares the statement first), with the
// statement's text, never its arguments, and the database's address, name
// and user, never a password. Nil when tracing is off.
func (t *Tracing) QueryTracer() pgx.QueryTracer {
	if !t.On() {
		return nil
	}
	// Named "query SELECT", "prepare SELECT", ...: pgx prepares a statement
	// inside its first query on a connection.
	return otelpgx.NewTracer(otelpgx.WithTracerProvider(t.tp), otelpgx.WithQuerySpanNamePrefix())
}

// Shutdown flushes the spans not yet exported and stops the exporter,
// within ctx. It does nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush spans: %w", err)
	}
	return nil
}

// FlushTimeout bounds Close's flush of the spans not yet exported.
const FlushTimeout = 5 * time.Second

// Close is Shutdown within FlushTimeout, for a process's graceful stop; a
// failure is logged to log.
func (t *Tracing) Close(log *slog.Logger) {
	if !t.On() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("spans may be lost", "err", err)
		return
	}
	log.Info("tracing: spans flushed")
}
