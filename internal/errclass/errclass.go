// Package errclass sorts the errors the bridge meets on its way from the
// broker to Temporal and PostgreSQL into two classes: transient (the same
// call may succeed later: retry with backoff, then hand the message back to
// the broker) and permanent (no retry of the same call can succeed: park
// the message with the reason). An error it does not recognise is
// transient: retrying is the safe default, and the bridge bounds how long a
// message is retried.
package errclass

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Class is what an error means for the message that met it.
type Class int

const (
	// Transient: the service is unreachable, slow, busy or restarting;
	// the same call may succeed later.
	Transient Class = iota
	// Permanent: the service refuses this input; the same call fails
	// every time.
	Permanent
)

// String returns "transient" or "permanent".
func (c Class) String() string {
	if c == Permanent {
		return "permanent"
	}
	return "transient"
}

// Of returns the class of err (nil is transient; callers ask about
// failures):
//
//   - a context cancelled or past its deadline: transient (an attempt ran
//     out of time, which says nothing about the input);
//   - the Temporal SDK's data converter cannot encode the value (it fails
//     before anything is sent): permanent;
//   - a gRPC status from Temporal: InvalidArgument (the server's answer to
//     a payload over its blob size limit, among others) and
//     ResourceExhausted for a message over gRPC's size limit are
//     permanent; every other code (Unavailable, DeadlineExceeded,
//     ResourceExhausted for rate limits and busy workflows, Internal,
//     NotFound for a namespace, ...) is transient, and so is an
//     InvalidArgument that names a search attribute the namespace does not
//     define (OrderStatus not registered yet: the namespace, not the
//     message, needs fixing);
//   - a PostgreSQL error, by its SQLSTATE (see pgClass);
//   - anything else (connection refused, reset, EOF, ...): transient.
func Of(err error) Class {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Transient
	case errors.Is(err, converter.ErrUnableToEncode), errors.Is(err, converter.ErrUnableToFindConverter):
		return Permanent
	}
	if st := grpcStatus(err); st != nil {
		return statusClass(st)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgClass(pgErr.Code)
	}
	return Transient
}

// grpcStatus is the gRPC status err carries, as the SDK's service errors
// (serviceerror) or as a plain gRPC status error; nil when it carries none.
func grpcStatus(err error) *status.Status {
	var se serviceerror.ServiceError
	if errors.As(err, &se) {
		return se.Status()
	}
	var ge interface{ GRPCStatus() *status.Status }
	if errors.As(err, &ge) {
		return ge.GRPCStatus()
	}
	return nil
}

// statusClass classifies a gRPC status from Temporal.
func statusClass(st *status.Status) Class {
	switch st.Code() {
	case codes.InvalidArgument:
		if undefinedSearchAttribute(st.Message()) {
			return Transient
		}
		return Permanent
	case codes.ResourceExhausted:
		if messageTooLarge(st.Message()) {
			return Permanent
		}
	}
	return Transient
}

// undefinedSearchAttribute reports whether an InvalidArgument message is
// the server's refusal of a search attribute its namespace does not define:
// "search attribute OrderStatus is not defined", or with SQL visibility
// "Namespace default has no mapping defined for search attribute
// OrderStatus".
func undefinedSearchAttribute(msg string) bool {
	return strings.HasPrefix(msg, "search attribute ") && strings.HasSuffix(msg, " is not defined") ||
		strings.HasPrefix(msg, "Namespace ") && strings.Contains(msg, " has no mapping defined for search attribute ")
}

// messageTooLarge reports whether a ResourceExhausted message is gRPC's
// refusal of a message over its size limit ("grpc: received message larger
// than max (5242880 vs. 4194304)", "grpc: received message after
// decompression larger than max 4194304", "grpc: trying to send message
// larger than max ...") rather than a rate limit.
func messageTooLarge(msg string) bool {
	return strings.Contains(msg, "larger than max") || strings.Contains(msg, "message too large")
}

// pgClass classifies a PostgreSQL SQLSTATE. Permanent: the classes no
// retry can satisfy, 0A feature not supported, 21 cardinality violation,
// 22 data exception, 23 integrity constraint violation, 42 syntax error or
// access rule violation, 44 WITH CHECK OPTION violation, 54 program limit
// exceeded, and 40002 transaction integrity constraint violation.
// Everything else is transient, notably 08 connection exception, 40001
// serialization failure, 40P01 deadlock detected, 53 insufficient
// resources, 55P03 lock not available, 57 operator intervention (query
// cancelled, shutdown, cannot connect now) and 58 system error.
func pgClass(code string) Class {
	if code == "40002" {
		return Permanent
	}
	if len(code) < 2 {
		return Transient
	}
	switch code[:2] {
	case "0A", "21", "22", "23", "42", "44", "54":
		return Permanent
	}
	return Transient
}
