package doccheck

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"
)

var (
	heading  = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	htmlName = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)

// Slug is the anchor GitHub gives a heading: lower case, code font and
// punctuation dropped (but hyphens and underscores), spaces as hyphens.
func Slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Anchors returns the anchors of a page's headings, a repeated heading's
// second one with "-1" and so on, outside fenced code.
func Anchors(body string) map[string]bool {
	body = fence.ReplaceAllString(body, "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(body, -1) {
		s := Slug(mdLink.ReplaceAllString(m[1], "]"))
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlName.FindAllStringSubmatch(body, -1) {
		out[m[1]] = true
	}
	return out
}

// Tree is what the link check knows of the repository: whether a path
// exists, and a Markdown file's text.
type Tree struct {
	Exists func(rel string) bool
	Read   func(rel string) (string, bool)
}

// CheckLinks checks every relative link of a page: the file it names
// exists, and so does the heading its #anchor names.
func (t Tree) CheckLinks(p Page) []Finding {
	var out []Finding
	body := fence.ReplaceAllStringFunc(p.Body, func(s string) string { return strings.Repeat(" ", len(s)) })
	for _, m := range mdLink.FindAllStringSubmatchIndex(body, -1) {
		target := body[m[2]:m[3]]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		rel := p.Name
		if file != "" {
			f, err := url.PathUnescape(file)
			if err != nil {
				f = file
			}
			rel = path.Clean(path.Join(path.Dir(p.Name), f))
			if !t.Exists(rel) {
				out = append(out, p.finding(m[0], "link %s: %s does not exist", target, rel))
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(rel, ".md") {
			continue
		}
		text, ok := t.Read(rel)
		if !ok {
			continue
		}
		if !Anchors(text)[anchor] {
			out = append(out, p.finding(m[0], "link %s: %s has no heading whose anchor is #%s", target, rel, anchor))
		}
	}
	return out
}
