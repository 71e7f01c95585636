package doccheck

import (
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Source is the repository's files a page's names must occur in, by path
// from the root: code (tests left out: a name only a test uses is no name
// of the programs), scripts, configuration and the generated reference.
type Source map[string]string

var token = regexp.MustCompile(`[A-Za-z0-9_]+`)

// Tokens returns every word (letters, digits, underscores) of the
// sources, for exact matches: ORDERFLOW_FOO does not match
// ORDERFLOW_FOO_BAR.
func (s Source) Tokens() map[string]bool {
	out := map[string]bool{}
	for _, text := range s {
		for _, t := range token.FindAllString(text, -1) {
			out[t] = true
		}
	}
	return out
}

var (
	countedClaim = regexp.MustCompile("\\b(one|two|three|four|five|six|seven|eight|nine|ten|[0-9]+)\\s+`([A-Za-z_][A-Za-z0-9_]*)`\\s+uses\\s+of\\s+`([a-z0-9_/]+)/?`")
	numberWords  = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
)

// CheckCountedClaims checks each "the N `Name` uses of `dir`" a page
// gives: the Go files of dir (tests left out) call a Name of another
// package (pkg.Name) N times.
func (s Source) CheckCountedClaims(p Page) ([]Finding, int) {
	var out []Finding
	n := 0
	for _, m := range countedClaim.FindAllStringSubmatchIndex(p.Body, -1) {
		n++
		word, name, dir := p.Body[m[2]:m[3]], p.Body[m[4]:m[5]], p.Body[m[6]:m[7]]
		said, ok := numberWords[word]
		if !ok {
			said, _ = strconv.Atoi(word)
		}
		call := regexp.MustCompile(`\.` + regexp.QuoteMeta(name) + `\(`)
		got := 0
		for file, text := range s {
			if path.Dir(file) == strings.TrimSuffix(dir, "/") && strings.HasSuffix(file, ".go") {
				got += len(call.FindAllStringIndex(text, -1))
			}
		}
		if got != said {
			out = append(out, p.finding(m[0], "%s `%s` uses of `%s`: its code has %d", word, name, dir, got))
		}
	}
	return out, n
}

var mdName = regexp.MustCompile(`\b[A-Za-z0-9_-]+\.md\b`)

// CheckMarkdownNames checks every Markdown file a Go file names (in a
// comment, say): a file of that name exists in the repository (mdFiles:
// the base names of its .md files).
func CheckMarkdownNames(goFile, text string, mdFiles map[string]bool) []Finding {
	var out []Finding
	p := Page{Name: goFile, Body: text}
	for _, m := range mdName.FindAllStringIndex(text, -1) {
		if name := text[m[0]:m[1]]; !mdFiles[name] {
			out = append(out, p.finding(m[0], "names %s, which is no file of the repository", name))
		}
	}
	return out
}

// Refuted is a statement the code contradicts, as a pattern of the words
// that make it, with the fact that refutes it and where the fact is kept.
type Refuted struct {
	Pattern *regexp.Regexp
	Fact    string
}

// CheckRefuted reports each refuted statement a page makes. Whitespace,
// line breaks and comment markers (#) between the words do not matter.
func CheckRefuted(p Page, refuted []Refuted) []Finding {
	var out []Finding
	for _, r := range refuted {
		for _, m := range r.Pattern.FindAllStringIndex(p.Body, -1) {
			out = append(out, p.finding(m[0], "%q: %s", strings.Join(strings.Fields(p.Body[m[0]:m[1]]), " "), r.Fact))
		}
	}
	return out
}
