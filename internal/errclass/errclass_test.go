package errclass

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wrapped stands for the SDK's wrapper of an oversized message's status
// (an unexported type with Unwrap and GRPCStatus).
type wrapped struct{ err error }

func (w wrapped) Error() string { return w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

// encodeErr is the error the SDK's default data converter returns for v.
func encodeErr(t *testing.T, v any) error {
	t.Helper()
	_, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err == nil {
		t.Fatalf("the default data converter encoded %v", v)
	}
	return fmt.Errorf("deliver order event o-1@2 to order:o-1: %w", err)
}

func TestOf(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("park dead letter: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"})
	}
	plus24 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.FixedZone("", 24*3600))
	for _, c := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, Transient},
		{"plain error", errors.New("connection refused"), Transient},
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, Transient},
		{"attempt deadline", fmt.Errorf("signal: %w", context.DeadlineExceeded), Transient},
		{"cancelled", fmt.Errorf("signal: %w", context.Canceled), Transient},

		// Temporal: the data converter, before anything is sent.
		{"occurred_at at +24:00", encodeErr(t, plus24), Permanent},
		{"unencodable value", encodeErr(t, make(chan int)), Permanent},
		{"no converter", fmt.Errorf("x: %w", converter.ErrUnableToFindConverter), Permanent},
		// Temporal: the server's answers.
		{"blob over the limit", fmt.Errorf("deliver: %w", serviceerror.NewInvalidArgument("Blob data size exceeds limit.")), Permanent},
		{"invalid argument", serviceerror.NewInvalidArgument("WorkflowId exceeds length limit."), Permanent},
		{"search attribute not registered", fmt.Errorf("deliver: %w", serviceerror.NewInvalidArgument("search attribute OrderStatus is not defined")), Transient},
		{"search attribute not mapped (SQL visibility)", serviceerror.NewInvalidArgument("Namespace nosa has no mapping defined for search attribute OrderStatus"), Transient},
		{"search attribute of the wrong type", serviceerror.NewInvalidArgument("invalid value for search attribute OrderStatus of type Keyword: 7"), Permanent},
		{"grpc message too large", fmt.Errorf("deliver: %w", wrapped{status.Error(codes.ResourceExhausted,
			"grpc: received message after decompression larger than max 4194304")}), Permanent},
		{"grpc send too large", status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (5000000 vs. 4194304)"), Permanent},
		{"invalid argument status", status.Error(codes.InvalidArgument, "bad"), Permanent},
		{"unavailable", fmt.Errorf("deliver: %w", serviceerror.NewUnavailable("connection refused")), Transient},
		{"unavailable status", status.Error(codes.Unavailable, "connection error"), Transient},
		{"deadline exceeded", serviceerror.NewDeadlineExceeded("context deadline exceeded"), Transient},
		{"busy workflow", serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW, "workflow is busy"), Transient},
		{"rate limited", serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, "namespace rate limit exceeded"), Transient},
		{"throttled status", status.Error(codes.ResourceExhausted, "service rate limit exceeded"), Transient},
		{"internal", serviceerror.NewInternal("persistence failure"), Transient},
		{"namespace not found", serviceerror.NewNamespaceNotFound("default"), Transient},

		// PostgreSQL.
		{"22P02 invalid text", pg("22P02"), Permanent},
		{"22001 string too long", pg("22001"), Permanent},
		{"23505 unique violation", pg("23505"), Permanent},
		{"23503 foreign key", pg("23503"), Permanent},
		{"42P01 undefined table", pg("42P01"), Permanent},
		{"42501 insufficient privilege", pg("42501"), Permanent},
		{"54000 program limit", pg("54000"), Permanent},
		{"0A000 not supported", pg("0A000"), Permanent},
		{"40002 integrity at commit", pg("40002"), Permanent},
		{"40001 serialization", pg("40001"), Transient},
		{"40P01 deadlock", pg("40P01"), Transient},
		{"08006 connection failure", pg("08006"), Transient},
		{"53300 too many connections", pg("53300"), Transient},
		{"57P01 admin shutdown", pg("57P01"), Transient},
		{"57014 query cancelled", pg("57014"), Transient},
		{"57P03 cannot connect now", pg("57P03"), Transient},
		{"55P03 lock not available", pg("55P03"), Transient},
		{"58030 io error", pg("58030"), Transient},
		{"XX000 internal", pg("XX000"), Transient},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Of(c.err); got != c.want {
				t.Errorf("Of(%v) = %s, want %s", c.err, got, c.want)
			}
		})
	}
}
