package obs

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel parses a log level name: debug, info, warn or error (any case).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("obs: unknown log level %q (want debug, info, warn or error)", s)
}

// NewLogger returns a JSON slog logger writing to w at the given level, with
// a "service" attribute on every record.
func NewLogger(w io.Writer, level slog.Leveler, service string) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(h).With("service", service)
}

// NewLoggerAt returns NewLogger on w at the level named by level (debug,
// info, warn or error). An unknown level is an error.
func NewLoggerAt(w io.Writer, level, service string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return NewLogger(w, l, service), nil
}
