// Package mq wraps the RocketMQ Go client (rocketmq-client-go v2.1.2) for
// orderflow: a producer that publishes order events with the keys, tag and
// sharding key of the message contract, and a push consumer that tracks its
// in-flight callbacks so that it can stop gracefully.
//
// The wrappers work around known traits of the client: its default queue
// selector ignores the sharding key (the producer uses the hash selector), its
// consumer Shutdown does not wait for running callbacks (Consumer.Stop does),
// and it logs verbosely through logrus (UseSlog routes its logs to log/slog).
package mq

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// nameServers splits a comma-separated list of name server addresses and
// checks that it is not empty.
func nameServers(namesrv string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(namesrv, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("mq: no RocketMQ name server address in %q", namesrv)
	}
	return addrs, nil
}

// resolver returns a resolver that hands the client the given addresses as
// they are, without the HTTP lookup the client would otherwise attempt.
// credentials are the client's ACL credentials; empty keys mean none.
func credentials(accessKey, secretKey string) primitive.Credentials {
	return primitive.Credentials{AccessKey: accessKey, SecretKey: secretKey}
}

func resolver(addrs []string) primitive.NsResolver {
	return dnsResolver{addrs: addrs}
}

// dnsResolver hands the client the name servers' addresses with host
// names resolved to IP addresses, afresh on every call: the client accepts
// only IP addresses (it refuses "rocketmq-namesrv:9876" with "IP addr
// error"), and in docker-compose or Kubernetes the name servers are known
// by name and their addresses change when they restart. A name that does
// not resolve is handed over as it is, so the client's error names it.
type dnsResolver struct {
	addrs []string
}

// Resolve returns every address with each host name replaced by the
// addresses it resolves to.
func (r dnsResolver) Resolve() []string {
	out := make([]string, 0, len(r.addrs))
	for _, a := range r.addrs {
		out = append(out, resolveHost(a)...)
	}
	return out
}

// Description names the configured addresses.
func (r dnsResolver) Description() string {
	return "name servers " + strings.Join(r.addrs, ",")
}

// resolveHost resolves the host of host:port; an IP address, an address
// without a port or a host that does not resolve comes back unchanged.
func resolveHost(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) != nil {
		return []string{addr}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil || len(ips) == 0 {
		return []string{addr}
	}
	// IPv4 first and alone when there is one: "localhost" resolves to
	// ::1 too, where a name server listening on 0.0.0.0 does not answer.
	var v4, v6 []string
	for _, ip := range ips {
		if p := net.ParseIP(ip); p != nil && p.To4() != nil {
			v4 = append(v4, net.JoinHostPort(ip, port))
		} else {
			v6 = append(v6, net.JoinHostPort(ip, port))
		}
	}
	if len(v4) > 0 {
		return v4
	}
	return v6
}

var logOnce sync.Once

// quietDefault routes the client's logs to slog.Default at error level unless
// UseSlog was called earlier. Producers and consumers call it.
func quietDefault() {
	logOnce.Do(func() { rlog.SetLogger(&slogLogger{log: slog.Default(), min: levelVar(slog.LevelError)}) })
}

// UseSlog routes the RocketMQ client's logs to l, dropping records below min.
// Call it once at start-up, before creating producers or consumers; without it
// the client's logs go to slog.Default at error level.
func UseSlog(l *slog.Logger, min slog.Level) {
	logOnce.Do(func() {})
	rlog.SetLogger(&slogLogger{log: l.With("component", "rocketmq-client"), min: levelVar(min)})
}

func levelVar(l slog.Level) *slog.LevelVar {
	v := new(slog.LevelVar)
	v.Set(l)
	return v
}

// slogLogger adapts log/slog to the client's rlog.Logger interface.
type slogLogger struct {
	log *slog.Logger
	min *slog.LevelVar
}

func (s *slogLogger) emit(level slog.Level, msg string, fields map[string]interface{}) {
	if level < s.min.Level() {
		return
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for k, v := range fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
}

func (s *slogLogger) Debug(msg string, f map[string]interface{})   { s.emit(slog.LevelDebug, msg, f) }
func (s *slogLogger) Info(msg string, f map[string]interface{})    { s.emit(slog.LevelInfo, msg, f) }
func (s *slogLogger) Warning(msg string, f map[string]interface{}) { s.emit(slog.LevelWarn, msg, f) }
func (s *slogLogger) Error(msg string, f map[string]interface{}) {
	if msg == txStateNotCommit {
		// A rollback or an unknown outcome is a normal answer of a local
		// transaction, not an error.
		s.emit(slog.LevelDebug, msg, f)
		return
	}
	s.emit(slog.LevelError, msg, f)
}

// txStateNotCommit is what the client logs, at error level, whenever a local
// transaction answers other than commit.
const txStateNotCommit = "executeLocalTransaction but state unexpected"

// Fatal logs at error level. The client's own logger exits the process on
// Fatal; orderflow never lets a library end the process.
func (s *slogLogger) Fatal(msg string, f map[string]interface{}) { s.emit(slog.LevelError, msg, f) }

// Level sets the minimum level from the client's level names.
func (s *slogLogger) Level(level string) {
	switch strings.ToLower(level) {
	case "debug":
		s.min.Set(slog.LevelDebug)
	case "info":
		s.min.Set(slog.LevelInfo)
	case "warn", "warning":
		s.min.Set(slog.LevelWarn)
	default:
		s.min.Set(slog.LevelError)
	}
}

// OutputPath is ignored: logs go wherever the slog handler writes them.
func (s *slogLogger) OutputPath(string) error { return nil }
