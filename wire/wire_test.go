package wire

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 0, "plain"},
		{"a\x00b", 0, "ab"},
		{"a\xffb", 0, "a\uFFFDb"},
		{"ééé", 3, "é"},
		{"abc", 2, "ab"},
		{"abc", -1, "abc"},
	} {
		if got := Sanitize(c.in, c.n); got != c.want {
			t.Errorf("Sanitize(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestNewEnvelopeMakesTextStorableAndKeepsTheBody(t *testing.T) {
	body := []byte("\x00\xff{}")
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	env := NewEnvelope("T\x00", "id\xff", strings.Repeat("k", 2000), "PAID", body, at, true)
	if env.Topic != "T" || env.MessageID != "id\uFFFD" || env.Tags != "PAID" {
		t.Errorf("text fields %q %q %q", env.Topic, env.MessageID, env.Tags)
	}
	if len(env.Keys) != 1024 || !utf8.ValidString(env.Keys) {
		t.Errorf("keys of %d bytes, want 1024", len(env.Keys))
	}
	if !bytes.Equal(env.Body, body) || !env.StoredAt.Equal(at) || !env.InflateRefused {
		t.Errorf("body %q stored %v refused %v: not as given", env.Body, env.StoredAt, env.InflateRefused)
	}
	if e := NewEnvelope("T", "id", "", "", nil, time.Time{}, false); e.Body == nil {
		t.Error("a nil body stays nil; want an empty body, which stores as such")
	}
}

func TestStillCompressed(t *testing.T) {
	for _, c := range []struct {
		env  Envelope
		want bool
	}{
		{Envelope{}, false},
		{Envelope{InflateRefused: true}, true},
		{Envelope{Compression: "zstd"}, true},
	} {
		if got := c.env.StillCompressed(); got != c.want {
			t.Errorf("%+v.StillCompressed() = %v, want %v", c.env, got, c.want)
		}
	}
}
