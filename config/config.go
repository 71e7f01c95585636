// Package config is orderflow's one configuration mechanism. Every setting
// of every binary is a flag and an environment variable of the same
// meaning: the default is overridden by the variable, which is overridden
// by the flag. A setting shared by several binaries has the same flag and
// variable in each; `-h` lists every setting with its variable and default.
// Secret settings (passwords, API keys, secret keys) are never printed:
// usage text shows their defaults redacted, and nothing here logs a value.
package config

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Setting describes one configuration value.
type Setting struct {
	// Flag is the flag's name, without the dash.
	Flag string
	// Env is the environment variable.
	Env string
	// Usage says what the setting is.
	Usage string
	// Secret settings are never printed.
	Secret bool
}

// Own returns the Setting of a binary's own flag, whose variable is prefix
// followed by the flag in upper case with underscores: Own("ORDERFLOW_BENCH_",
// "scale-orders", ...) is -scale-orders and ORDERFLOW_BENCH_SCALE_ORDERS.
func Own(prefix, flag, usage string) Setting {
	return Setting{Flag: flag, Env: prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")), Usage: usage}
}

// Set is the settings of one binary (or subcommand).
type Set struct {
	fs       *flag.FlagSet
	out      io.Writer
	synopsis string
	list     []entry
	set      map[string]bool
}

type entry struct {
	Setting
	def string
}

// NewSet returns an empty set for the binary name; synopsis opens its usage
// text ("Usage: worker [flags]", say). Usage and errors go to out.
func NewSet(name, synopsis string, out io.Writer) *Set {
	s := &Set{fs: flag.NewFlagSet(name, flag.ContinueOnError), out: out, synopsis: synopsis, set: map[string]bool{}}
	s.fs.SetOutput(out)
	s.fs.Usage = s.usage
	return s
}

func (s *Set) add(st Setting, def string) {
	s.list = append(s.list, entry{st, def})
}

// String registers a string setting.
func (s *Set) String(p *string, def string, st Setting) {
	s.fs.StringVar(p, st.Flag, def, st.Usage)
	s.add(st, def)
}

// Int registers an integer setting.
func (s *Set) Int(p *int, def int, st Setting) {
	s.fs.IntVar(p, st.Flag, def, st.Usage)
	s.add(st, strconv.Itoa(def))
}

// Float registers a floating-point setting.
func (s *Set) Float(p *float64, def float64, st Setting) {
	s.fs.Float64Var(p, st.Flag, def, st.Usage)
	s.add(st, strconv.FormatFloat(def, 'g', -1, 64))
}

// Duration registers a duration setting ("30s", "5m").
func (s *Set) Duration(p *time.Duration, def time.Duration, st Setting) {
	s.fs.DurationVar(p, st.Flag, def, st.Usage)
	s.add(st, def.String())
}

// Bool registers a boolean setting.
func (s *Set) Bool(p *bool, def bool, st Setting) {
	s.fs.BoolVar(p, st.Flag, def, st.Usage)
	s.add(st, strconv.FormatBool(def))
}

// Parse applies the environment (os.LookupEnv when lookup is nil), then the
// flags in args. An empty variable counts as unset. It returns
// flag.ErrHelp after printing the usage for -h.
func (s *Set) Parse(args []string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, e := range s.list {
		if e.Env == "" {
			continue
		}
		v, ok := lookup(e.Env)
		if !ok || v == "" {
			continue
		}
		if err := s.fs.Set(e.Flag, v); err != nil {
			if e.Secret {
				return fmt.Errorf("%s: invalid value", e.Env)
			}
			return fmt.Errorf("%s: invalid value %q: %w", e.Env, v, err)
		}
	}
	if err := s.fs.Parse(args); err != nil {
		return err
	}
	s.fs.Visit(func(f *flag.Flag) { s.set[f.Name] = true })
	return nil
}

// IsSet reports whether the setting with this flag name was given, by its
// variable or its flag.
func (s *Set) IsSet(flagName string) bool { return s.set[flagName] }

// Args returns the arguments after the flags.
func (s *Set) Args() []string { return s.fs.Args() }

// Usage prints the usage text.
func (s *Set) Usage() { s.usage() }

func (s *Set) usage() {
	fmt.Fprintf(s.out, "%s\n\nEvery flag can also be set by the environment variable shown (flags win).\n\n", s.synopsis)
	for _, e := range s.list {
		fmt.Fprintf(s.out, "  -%s\n    \t%s", e.Flag, e.Usage)
		var notes []string
		if e.Env != "" {
			notes = append(notes, "env "+e.Env)
		}
		if e.Secret {
			notes = append(notes, "secret")
		}
		switch {
		case e.Secret && e.def != "":
			notes = append(notes, "default "+Redact(e.def))
		case e.def != "":
			notes = append(notes, "default "+e.def)
		}
		if len(notes) > 0 {
			fmt.Fprintf(s.out, " (%s)", strings.Join(notes, "; "))
		}
		fmt.Fprintln(s.out)
	}
}

// Redact returns a secret value fit to print: a URL with its password and
// any query parameter that names a password, key or secret replaced by
// "xxxxx"; anything else as "xxxxx" (empty stays empty).
func Redact(v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "xxxxx"
	}
	if q := u.Query(); len(q) > 0 {
		for k := range q {
			lk := strings.ToLower(k)
			if strings.Contains(lk, "password") || strings.Contains(lk, "secret") || strings.Contains(lk, "key") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
