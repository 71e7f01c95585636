package doccheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Page is one Markdown page: its path from the repository's root and its
// text.
type Page struct {
	Name string
	Body string
}

// Finding is one claim of a page that the code, the tree or a file
// contradicts.
type Finding struct {
	Page string
	Line int
	Msg  string
}

// String is the finding as "page:line: message".
func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.Page, f.Line, f.Msg) }

// line is the line number of offset in the page.
func (p Page) line(offset int) int { return strings.Count(p.Body[:offset], "\n") + 1 }

func (p Page) finding(offset int, format string, args ...any) Finding {
	return Finding{Page: p.Name, Line: p.line(offset), Msg: fmt.Sprintf(format, args...)}
}

// Code is a piece of code a page shows: an inline code span, or one
// command line of a fenced block (continuation lines joined, a shell
// comment cut off).
type Code struct {
	Text   string
	Offset int
	Fenced bool
}

var (
	fence      = regexp.MustCompile("(?ms)^ *```[a-z]*\\n(.*?)^ *```")
	inlineCode = regexp.MustCompile("`[^`]+`")
)

// Code returns the page's code: fenced blocks line by line, then inline
// spans outside them (an inline span may wrap lines).
func (p Page) Code() []Code {
	var out []Code
	body := []byte(p.Body)
	for _, m := range fence.FindAllStringSubmatchIndex(p.Body, -1) {
		start := m[2]
		var cur strings.Builder
		curOff := -1
		for _, l := range strings.SplitAfter(p.Body[m[2]:m[3]], "\n") {
			off := start
			start += len(l)
			l = strings.TrimRight(l, "\n")
			if i := strings.Index(l, " #"); i >= 0 && !strings.Contains(l[:i], "'") {
				l = l[:i]
			}
			if curOff < 0 {
				curOff = off
			}
			cont := strings.HasSuffix(strings.TrimSpace(l), `\`)
			cur.WriteString(strings.TrimSuffix(strings.TrimSpace(l), `\`))
			cur.WriteByte(' ')
			if !cont {
				if t := strings.TrimSpace(cur.String()); t != "" {
					out = append(out, Code{Text: t, Offset: curOff, Fenced: true})
				}
				cur.Reset()
				curOff = -1
			}
		}
		for i := m[0]; i < m[1]; i++ {
			if body[i] != '\n' {
				body[i] = ' '
			}
		}
	}
	for _, m := range inlineCode.FindAllIndex(body, -1) {
		text := strings.Join(strings.Fields(string(body[m[0]+1:m[1]-1])), " ")
		out = append(out, Code{Text: text, Offset: m[0]})
	}
	return out
}

// paragraph returns the paragraph around offset: from the blank line
// before it to the blank line after it.
func (p Page) paragraph(offset int) string {
	start := strings.LastIndex(p.Body[:offset], "\n\n")
	if start < 0 {
		start = 0
	}
	end := strings.Index(p.Body[offset:], "\n\n")
	if end < 0 {
		end = len(p.Body) - offset
	}
	return p.Body[start : offset+end]
}

// words splits a command line into words, dropping the quotes of a quoted
// word.
func words(s string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
