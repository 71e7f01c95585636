package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What the human-readable outputs print of text a producer controls (keys,
// tags, message and event IDs, bodies, the reasons quoting them) goes
// through safe or safeBody, so that a terminal shows it and never acts on
// it: an escape sequence could retitle the window, clear the screen or move
// the cursor over earlier lines, and a bidirectional override reorders what
// is shown. -json prints the values exactly.

// safe returns s fit for one line of a terminal: every control character
// (C0 including tab and newline, DEL, C1), every invisible formatting
// character (bidirectional overrides and isolates, zero-width characters),
// the line and paragraph separators and every byte that is not UTF-8 are
// written as escapes (\n, \t, \r, \xNN, \uNNNN); the rest is kept.
func safe(s string) string { return escape(s, false) }

// safeBody is safe for a message body printed on lines of its own: its
// newlines and tabs, the layout of an indented body, are kept.
func safeBody(s string) string { return escape(s, true) }

// escape writes the characters safe escapes; keepLayout keeps newlines and
// tabs.
func escape(s string, keepLayout bool) string {
	if !needsEscape(s, keepLayout) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case (r == '\n' || r == '\t') && keepLayout:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case !hidden(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether escape would change s.
func needsEscape(s string, keepLayout bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || hidden(r) && !((r == '\n' || r == '\t') && keepLayout) {
			return true
		}
		i += n
	}
	return false
}

// hidden reports whether a terminal acts on r or does not show it: a
// control character (Cc), a formatting character (Cf: bidirectional
// controls, zero-width characters), a line or paragraph separator.
func hidden(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}
