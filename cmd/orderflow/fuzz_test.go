package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseWindow: any -older-than either is a positive duration, the Go
// duration the text says or that many days, or is refused as bad usage
// naming the text.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"720h", "30d", "1.5d", ".5d", "0d", "-1d", "0", "-5m", "30", "d", "1e3d", "1e300d", "NaNd", "Infd",
		"9223372036s", "106751d", "106752d", "1h30m", "", " 30d", "30D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseWindow(s)
		if err != nil {
			if d != 0 || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("parseWindow(%q) = %v, %v; want 0 and a usage error quoting it", s, d, err)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("parseWindow(%q) = %v, accepted but not positive", s, d)
		}
		if g, gerr := time.ParseDuration(s); gerr == nil {
			if d != g {
				t.Fatalf("parseWindow(%q) = %v, want the Go duration %v", s, d, g)
			}
			return
		}
		days, ok := strings.CutSuffix(s, "d")
		n, nerr := strconv.ParseFloat(days, 64)
		if !ok || nerr != nil {
			t.Fatalf("parseWindow(%q) = %v: accepted, but it is neither a Go duration nor a number of days", s, d)
		}
		// That many days, to the nanosecond's rounding.
		if want := n * 24 * float64(time.Hour); math.Abs(float64(d)-want) > math.Max(1, want*1e-12) {
			t.Fatalf("parseWindow(%q) = %v, want %g days", s, d, n)
		}
	})
}

// FuzzParseSince: any -since is the zero time (empty), a time that far
// back from now (a positive Go duration), an RFC 3339 time, or bad usage
// naming the text.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"", "24h", "90m", "0s", "-1h", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05+02:00", "2026-01-02",
		"last week", "2562047h47m16.854775807s", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseSince(s, now)
		if err != nil {
			if !got.IsZero() || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("parseSince(%q) = %v, %v; want the zero time and a usage error quoting it", s, got, err)
			}
			return
		}
		if s == "" {
			if !got.IsZero() {
				t.Fatalf("parseSince(\"\") = %v, want the zero time", got)
			}
			return
		}
		if d, derr := time.ParseDuration(s); derr == nil && d > 0 {
			if !got.Equal(now.Add(-d)) {
				t.Fatalf("parseSince(%q) = %v, want %v before %v", s, got, d, now)
			}
			return
		}
		want, perr := time.Parse(time.RFC3339, s)
		if perr != nil || !got.Equal(want) {
			t.Fatalf("parseSince(%q) = %v; want the RFC 3339 time %v (%v)", s, got, want, perr)
		}
	})
}
