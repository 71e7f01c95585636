package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpSpan is one span an OTLP exporter sent, flattened.
type otlpSpan struct {
	TraceID, SpanID, ParentID string // hex; ParentID empty for a root
	Name, Service, Kind       string
	Start, End                time.Time
	Attrs                     map[string]string
	Error                     string // the status message of a failed span
}

func (s otlpSpan) Duration() time.Duration { return s.End.Sub(s.Start) }

// otlpReceiver is an OpenTelemetry collector reduced to what the tests
// need: it takes OTLP trace exports over gRPC and over HTTP (protobuf) on
// loopback listeners and keeps every span.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	GRPCAddr, HTTPAddr string

	mu      sync.Mutex
	spans   []otlpSpan
	exports map[string]int // exports received, by transport
}

// startOTLPReceiver starts a receiver, stopped when the test ends.
func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{exports: map[string]int{}}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(gln) }()
	t.Cleanup(gs.Stop)
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { _ = hs.Close() })
	r.GRPCAddr, r.HTTPAddr = gln.Addr().String(), hln.Addr().String()
	return r
}

// Export is the gRPC TraceService's method.
func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add("grpc", req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveHTTP takes an OTLP/HTTP export in protobuf.
func (r *otlpReceiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+" is not application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var er collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &er); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add("http", &er)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpReceiver) add(transport string, req *collectortrace.ExportTraceServiceRequest) {
	var got []otlpSpan
	for _, rs := range req.GetResourceSpans() {
		service := attrString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o := otlpSpan{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Name: s.GetName(), Service: service, Kind: strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_"),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attrs: map[string]string{},
				}
				if len(s.GetParentSpanId()) > 0 {
					o.ParentID = hex.EncodeToString(s.GetParentSpanId())
				}
				for _, kv := range s.GetAttributes() {
					o.Attrs[kv.GetKey()] = anyString(kv.GetValue())
				}
				if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
					o.Error = s.GetStatus().GetMessage()
				}
				got = append(got, o)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	r.exports[transport]++
}

// Trace returns the spans of one trace received so far, by start time.
func (r *otlpReceiver) Trace(traceID string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b otlpSpan) int { return a.Start.Compare(b.Start) })
	return out
}

// Exports returns how many exports arrived over transport ("grpc", "http").
func (r *otlpReceiver) Exports(transport string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports[transport]
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return anyString(kv.GetValue())
		}
	}
	return ""
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return fmt.Sprint(v.GetValue())
}

// spanTree renders spans as a tree: one line per span, indented under its
// parent, with its service and duration; spans whose parent is not among
// them are roots.
func spanTree(spans []otlpSpan) string {
	byID := map[string]bool{}
	children := map[string][]otlpSpan{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	var roots []otlpSpan
	for _, s := range spans {
		if s.ParentID == "" || !byID[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	var b bytes.Buffer
	var walk func(s otlpSpan, depth int)
	walk = func(s otlpSpan, depth int) {
		extra := ""
		if s.ParentID != "" && !byID[s.ParentID] {
			extra = " (parent " + s.ParentID + " not received)"
		}
		if s.Error != "" {
			extra += " ERROR " + s.Error
		}
		fmt.Fprintf(&b, "%s%s  [%s, %s]%s\n", strings.Repeat("  ", depth), s.Name, s.Service,
			s.Duration().Round(10*time.Microsecond), extra)
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, s := range roots {
		walk(s, 0)
	}
	return b.String()
}
