package doccheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Setting is one setting of one program, as docs/configuration.md lists
// it.
type Setting struct {
	// Env is the variable; empty for a flag-only setting.
	Env string
	// Flag is the flag's name, without the dash.
	Flag string
	// Default is the default as the program prints it; empty when none.
	Default string
	// Secret settings have their default redacted.
	Secret bool
	// Shared settings are read by several programs alike.
	Shared bool
}

// Program is one program, or one subcommand of the orderflow command
// ("worker", "starter", "orderflow dlq list").
type Program struct {
	Name     string
	Settings []Setting
}

// Setting returns the program's setting with this flag name.
func (p Program) Setting(flag string) (Setting, bool) {
	for _, s := range p.Settings {
		if s.Flag == flag {
			return s, true
		}
	}
	return Setting{}, false
}

// Subcommand is the program's name without "orderflow " ("dlq list"), or
// "" for another program.
func (p Program) Subcommand() string {
	sub, _ := strings.CutPrefix(p.Name, "orderflow ")
	if sub == p.Name {
		return ""
	}
	return sub
}

// Reference is every program's settings: the configuration registry as
// the programs print it with -h. docs/configuration.md is generated from
// that output by config/internal/docgen, whose TestReferenceIsCurrent
// fails when the file is stale, so reading the file is reading the
// registry.
type Reference struct {
	Programs []Program
}

// Program returns the program or subcommand of this name.
func (r Reference) Program(name string) (Program, bool) {
	for _, p := range r.Programs {
		if p.Name == name {
			return p, true
		}
	}
	return Program{}, false
}

// Subcommands returns the orderflow command's subcommands, first words
// and full names ("dlq" and "dlq list").
func (r Reference) Subcommands() map[string]bool {
	out := map[string]bool{}
	for _, p := range r.Programs {
		if sub := p.Subcommand(); sub != "" {
			out[sub] = true
			out[strings.Fields(sub)[0]] = true
		}
	}
	return out
}

// WithFlag returns the programs that have the flag.
func (r Reference) WithFlag(flag string) []Program {
	var out []Program
	for _, p := range r.Programs {
		if _, ok := p.Setting(flag); ok {
			out = append(out, p)
		}
	}
	return out
}

var (
	section   = regexp.MustCompile(`^## (.+)$`)
	sharedUse = regexp.MustCompile(`^Shared settings it reads: (.*)\.$`)
	row       = regexp.MustCompile("^\\| (`([A-Z][A-Z0-9_]*)`( \\(secret\\))?|\\*flag only\\*) \\| `-([a-z0-9-]+)` \\| (`([^`]*)`|—) \\|")
)

// ParseReference reads docs/configuration.md: the shared settings' table,
// then one section per program with the shared settings it reads and a
// table of its own.
func ParseReference(text string) (Reference, error) {
	var (
		ref     Reference
		shared  = map[string]Setting{}
		current = -1 // index in ref.Programs; -1 before the first program
		inShare bool
	)
	for n, line := range strings.Split(text, "\n") {
		if m := section.FindStringSubmatch(line); m != nil {
			inShare = m[1] == "Shared settings"
			if !inShare {
				ref.Programs = append(ref.Programs, Program{Name: m[1]})
				current = len(ref.Programs) - 1
			}
			continue
		}
		if m := sharedUse.FindStringSubmatch(line); m != nil && current >= 0 {
			for _, v := range strings.Split(m[1], ", ") {
				s, ok := shared[strings.Trim(v, "`")]
				if !ok {
					return ref, fmt.Errorf("line %d: %s reads the shared setting %s, which the shared table does not list", n+1, ref.Programs[current].Name, v)
				}
				ref.Programs[current].Settings = append(ref.Programs[current].Settings, s)
			}
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Setting{Env: m[2], Secret: m[3] != "", Flag: m[4], Default: m[6]}
		switch {
		case inShare:
			s.Shared = true
			shared[s.Env] = s
		case current >= 0:
			ref.Programs[current].Settings = append(ref.Programs[current].Settings, s)
		}
	}
	if len(ref.Programs) < 3 || len(shared) == 0 {
		return ref, fmt.Errorf("read %d programs and %d shared settings: is this the generated reference?", len(ref.Programs), len(shared))
	}
	for _, p := range ref.Programs {
		if len(p.Settings) == 0 {
			return ref, fmt.Errorf("%s: no settings read", p.Name)
		}
	}
	return ref, nil
}

// subcommandsWhere returns the subcommands (sorted) of which pred holds.
func (r Reference) subcommandsWhere(pred func(Program) bool) []string {
	var out []string
	for _, p := range r.Programs {
		if sub := p.Subcommand(); sub != "" && pred(p) {
			out = append(out, sub)
		}
	}
	slices.Sort(out)
	return out
}
