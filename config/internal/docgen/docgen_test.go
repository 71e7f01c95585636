package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/config"
)

// TestReferenceIsCurrent regenerates the reference in memory and compares
// it with the file in the repository.
func TestReferenceIsCurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, target))
	if err != nil {
		t.Fatalf("%v: run `go generate ./config` to write it", err)
	}
	if line, ok := firstDifference(got, want); ok {
		t.Fatalf("%s is stale (line %d differs): run `go generate ./config` and commit the result\n  file:      %q\n  generated: %q",
			target, line.n, line.got, line.want)
	}
}

type difference struct {
	n         int
	got, want string
}

// firstDifference is the first line where got and want differ.
func firstDifference(got, want []byte) (difference, bool) {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		d := difference{n: i + 1}
		if i < len(g) {
			d.got = g[i]
		}
		if i < len(w) {
			d.want = w[i]
		}
		if i >= len(g) || i >= len(w) || d.got != d.want {
			return d, true
		}
	}
	return difference{}, false
}

// TestParseUsageReadsWhatConfigPrints prints settings through package
// config's usage and reads them back.
func TestParseUsageReadsWhatConfigPrints(t *testing.T) {
	var (
		out      bytes.Buffer
		s1, s2   string
		s3, s4   string
		n        int
		b        bool
		duration time.Duration
	)
	set := config.NewSet("t", "Usage: t [flags]   (a test program)", &out)
	set.String(&s1, "postgres://u:pw@db:5432/x?sslmode=require", config.Setting{Flag: "db", Env: "T_DB", Usage: "a database (sslmode=require for TLS)", Secret: true})
	set.String(&s2, "", config.Setting{Flag: "key", Env: "T_KEY", Usage: "a key", Secret: true})
	set.Int(&n, 4, config.Setting{Flag: "pollers", Env: "T_POLLERS", Usage: "pollers (0: SDK default)"})
	set.Bool(&b, false, config.Setting{Flag: "yes", Usage: "do it (a flag only)"})
	set.String(&s3, "", config.Setting{Flag: "addr", Env: "T_ADDR", Usage: "listen address (empty: off)"})
	set.String(&s4, "", config.Setting{Flag: "note", Usage: "a flag with neither variable nor default (ends in a parenthesis)"})
	set.Duration(&duration, 90*time.Second, config.Setting{Flag: "wait", Env: "T_WAIT", Usage: "how long"})
	set.Usage()

	got, err := parseUsage(out.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := usage{Synopsis: "t [flags]   (a test program)", Settings: []setting{
		{Flag: "db", Env: "T_DB", Default: "postgres://u:xxxxx@db:5432/x?sslmode=require", Usage: "a database (sslmode=require for TLS)", Secret: true},
		{Flag: "key", Env: "T_KEY", Usage: "a key", Secret: true},
		{Flag: "pollers", Env: "T_POLLERS", Default: "4", Usage: "pollers (0: SDK default)"},
		{Flag: "yes", Default: "false", Usage: "do it (a flag only)"},
		{Flag: "addr", Env: "T_ADDR", Usage: "listen address (empty: off)"},
		{Flag: "note", Usage: "a flag with neither variable nor default (ends in a parenthesis)"},
		{Flag: "wait", Env: "T_WAIT", Default: "1m30s", Usage: "how long"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v\nfrom\n%s", got, want, out.String())
	}
}

func TestParseUsageRefusesWhatItCannotRead(t *testing.T) {
	for name, text := range map[string]string{
		"no usage line":  "worker [flags]\n  -a\n    \tb\n",
		"no settings":    "Usage: t\n\nEvery flag ...\n",
		"no usage text":  "Usage: t\n  -a\n  -b\n    \tc\n",
		"text, no flag":  "Usage: t\n    \tc\n",
		"two usage text": "Usage: t\n  -a\n    \tb\n    \tc\n",
	} {
		if u, err := parseUsage(text); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, u)
		}
	}
}

// TestRenderSharesAndEscapes checks that a setting two programs list
// alike is rendered once among the shared ones, that one program's
// setting stays in its section, and that usage text cannot break a table.
func TestRenderSharesAndEscapes(t *testing.T) {
	db := setting{Flag: "database-url", Env: "DATABASE_URL", Default: "postgres://u:xxxxx@h/db", Usage: "PostgreSQL URL", Secret: true}
	var b bytes.Buffer
	render(&b, []usage{
		{Name: "worker", Synopsis: "worker [flags]   (run it)", Settings: []setting{db, {Flag: "a", Env: "W_A", Usage: "x | y <z> *w*"}}},
		{Name: "orderflow why", Synopsis: "orderflow why ID", Settings: []setting{db, {Flag: "json", Usage: "print JSON"}}},
	})
	doc := b.String()
	for _, want := range []string{
		"## Shared settings\n\nThe same in every program that reads them; each program's section names those it reads.\n\n" +
			"| Variable | Flag | Default | Meaning |\n|---|---|---|---|\n" +
			"| `DATABASE_URL` (secret) | `-database-url` | `postgres://u:xxxxx@h/db` | PostgreSQL URL |\n\n## worker",
		"## worker\n\n`worker [flags]`: run it.\n\nShared settings it reads: `DATABASE_URL`.\n\n",
		"| `W_A` | `-a` | — | x \\| y &lt;z&gt; \\*w\\* |\n",
		"## orderflow why\n\n`orderflow why ID`\n",
		"| *flag only* | `-json` | — | print JSON |\n",
		"[orderflow why](#orderflow-why)",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("reference lacks %q:\n%s", want, doc)
		}
	}
	if n := strings.Count(doc, "| `DATABASE_URL`"); n != 1 {
		t.Errorf("DATABASE_URL in %d tables, want 1 (shared)", n)
	}
}
