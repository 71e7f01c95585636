package doccheck

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Flags is what the flag checks know: every program's settings, the
// benchmark's flags and the flags of the go tool the pages quote.
type Flags struct {
	Ref Reference
	// Bench is the flags of `make bench BENCH_FLAGS=...` (bench/main.go).
	Bench map[string]bool
	// Tools is the flags of other tools the pages show bare (`-count=1`
	// of go test).
	Tools map[string]bool
}

// GoTestFlags are the go tool's flags the pages may show on their own.
var GoTestFlags = map[string]bool{"count": true, "p": true, "timeout": true, "tags": true, "race": true, "short": true, "run": true, "v": true}

var benchFlag = regexp.MustCompile(`\bbs\("([a-z0-9-]+)"`)

// BenchFlags returns the flags bench/main.go registers (through its bs
// helper).
func BenchFlags(mainGo string) map[string]bool {
	out := map[string]bool{}
	for _, m := range benchFlag.FindAllStringSubmatch(mainGo, -1) {
		out[m[1]] = true
	}
	return out
}

var flagWord = regexp.MustCompile(`^--?([a-z][a-z0-9-]*)(=.*)?$`)

// invocation is an orderflow program run in a piece of code: the program
// (a Reference name) and the words after it.
type invocation struct {
	program string
	args    []string
	// unknown is a subcommand word that names no subcommand.
	unknown string
}

// invocations finds the orderflow programs a piece of code runs:
// orderflow SUBCOMMAND (also ./orderflow, /app/orderflow, go run
// ./cmd/orderflow), worker or starter with flags, and a span that starts
// with a subcommand and a flag (`rewind -yes`).
func (f Flags) invocations(code string) []invocation {
	w := words(code)
	subs := f.Ref.Subcommands()
	var out []invocation
	for i := 0; i < len(w); i++ {
		base := w[i]
		if j := strings.LastIndex(base, "/"); j >= 0 {
			base = base[j+1:]
		}
		rest := w[i+1:]
		if i > 0 && strings.HasPrefix(w[i-1], "-") {
			continue // an option's value: kubectl -n orderflow
		}
		switch {
		case base == "orderflow":
			if len(rest) == 0 || !cliWord.MatchString(rest[0]) {
				continue
			}
			out = append(out, f.subcommand(rest, subs))
		case (base == "worker" || base == "starter") && len(rest) > 0 && flagWord.MatchString(rest[0]):
			out = append(out, invocation{program: base, args: rest})
		case i == 0 && subs[base] && len(rest) > 0 && (flagWord.MatchString(rest[0]) || subs[base+" "+rest[0]]):
			out = append(out, f.subcommand(w, subs))
		default:
			continue
		}
		break
	}
	return out
}

func (f Flags) subcommand(w []string, subs map[string]bool) invocation {
	if len(w) > 1 && subs[w[0]+" "+w[1]] {
		return invocation{program: "orderflow " + w[0] + " " + w[1], args: w[2:]}
	}
	if _, ok := f.Ref.Program("orderflow " + w[0]); ok {
		return invocation{program: "orderflow " + w[0], args: w[1:]}
	}
	if subs[w[0]] && len(w) > 1 {
		return invocation{unknown: w[0] + " " + w[1]}
	}
	return invocation{unknown: w[0]}
}

// CheckCommands checks every orderflow, worker and starter command line a
// page shows: the subcommand exists and each flag is one of its own; a
// flag shown alone is one of some program's, the benchmark's or the go
// tool's.
func (f Flags) CheckCommands(p Page) []Finding {
	var out []Finding
	for _, c := range p.Code() {
		invs := f.invocations(c.Text)
		for _, inv := range invs {
			if inv.unknown != "" {
				out = append(out, p.finding(c.Offset, "`%s`: orderflow has no subcommand %q", c.Text, inv.unknown))
				continue
			}
			prog, _ := f.Ref.Program(inv.program)
			for _, a := range inv.args {
				if a == "|" || a == "&&" || a == ";" || strings.HasPrefix(a, ">") {
					break
				}
				m := flagWord.FindStringSubmatch(a)
				if m == nil || m[1] == "h" || m[1] == "help" {
					continue
				}
				if _, ok := prog.Setting(m[1]); !ok {
					out = append(out, p.finding(c.Offset, "`%s`: %s has no flag -%s", c.Text, inv.program, m[1]))
				}
			}
		}
		if len(invs) > 0 {
			continue
		}
		if v, ok := strings.CutPrefix(c.Text, "BENCH_FLAGS="); ok || strings.Contains(c.Text, "BENCH_FLAGS=") {
			if !ok {
				v = c.Text[strings.Index(c.Text, "BENCH_FLAGS=")+len("BENCH_FLAGS="):]
			}
			for _, a := range words(strings.Join(words(v), " ")) {
				if m := flagWord.FindStringSubmatch(a); m != nil && m[1] != "h" && !f.Bench[m[1]] {
					out = append(out, p.finding(c.Offset, "`%s`: the benchmark has no flag -%s", c.Text, m[1]))
				}
			}
			continue
		}
		w := words(c.Text)
		if len(w) == 0 || c.Fenced {
			continue
		}
		m := flagWord.FindStringSubmatch(w[0])
		if m == nil || !strings.HasPrefix(w[0], "-") || strings.HasPrefix(w[0], "--") || m[1] == "h" {
			continue
		}
		if len(f.Ref.WithFlag(m[1])) == 0 && !f.Bench[m[1]] && !f.Tools[m[1]] {
			out = append(out, p.finding(c.Offset, "`%s`: no program, benchmark or go tool has the flag -%s", c.Text, m[1]))
		}
	}
	return out
}

var (
	namedSetting = regexp.MustCompile("`(-[a-z][a-z0-9-]*|[A-Z][A-Z0-9_]*[A-Z0-9])(?: [A-Z]+)?`")
	// defaultAfter matches what follows a setting's name when a page gives
	// its default: "(default V", ", default V", " (V)", ", V)", ", V by
	// default", optionally after the setting's other name in code font.
	defaultAfter = regexp.MustCompile("^(?:,? `[^`]+`)?(?:(?:,? \\(|, )default (" + number + "|`[^`]+`|[^ ,;)]+)|(?:,? \\(|, )(" + number + ")(?:\\)| by default))")
	number       = `[0-9](?:[0-9,.]*[0-9])?(?: ?(?:ms|s|min|minutes?|h|hours?)\b)?`
)

// CheckDefaults checks every default a page gives for a flag or variable
// in code font ("`-limit N` (default 100", "`-wait` (30 s)", "`-margin`,
// 5 minutes by default") against the default of that setting. A flag
// several programs have is taken as that of the programs the paragraph
// runs when one of them has it.
func (f Flags) CheckDefaults(p Page) []Finding {
	var out []Finding
	flat := regexp.MustCompile(`\s+`)
	for _, m := range namedSetting.FindAllStringSubmatchIndex(p.Body, -1) {
		name := p.Body[m[2]:m[3]]
		tail := p.Body[m[1]:min(len(p.Body), m[1]+120)]
		tail = flat.ReplaceAllString(tail, " ")
		d := defaultAfter.FindStringSubmatch(tail)
		if d == nil {
			continue
		}
		said := d[1] + d[2]
		cands := f.settings(name, p.paragraph(m[0]))
		if len(cands) == 0 {
			continue // CheckCommands and TestVariablesExist name unknown settings
		}
		ok := false
		var defs []string
		for _, s := range cands {
			if s.Secret || sameDefault(said, s.Default) {
				ok = true
				break
			}
			def := s.Default
			if def == "" {
				def = "none"
			}
			defs = append(defs, def)
		}
		if !ok {
			out = append(out, p.finding(m[0], "%s: the page gives the default %s, the program's is %s", name, said, strings.Join(uniq(defs), " or ")))
		}
	}
	return out
}

// settings returns the settings a name (a flag with its dash, or a
// variable) may mean in a paragraph.
func (f Flags) settings(name, paragraph string) []Setting {
	var all, named []Setting
	var progs []string
	for _, c := range (Page{Body: paragraph}).Code() {
		for _, inv := range f.invocations(c.Text) {
			progs = append(progs, inv.program)
		}
	}
	for _, p := range f.Ref.Programs {
		for _, s := range p.Settings {
			if "-"+s.Flag == name || (s.Env != "" && s.Env == name) {
				all = append(all, s)
				for _, n := range progs {
					if n == p.Name {
						named = append(named, s)
					}
				}
			}
		}
	}
	if len(named) > 0 && strings.HasPrefix(name, "-") {
		return named
	}
	return all
}

var units = strings.NewReplacer(" ", "", "minutes", "m", "minute", "m", "min", "m", "hours", "h", "hour", "h", ",", "")

// sameDefault compares a default as a page gives it with the program's:
// a duration as a duration (5 minutes is 5m0s), a number as a number
// (1,000 is 1000), anything else as text.
func sameDefault(said, def string) bool {
	said = strings.Trim(said, "`")
	if said == def {
		return true
	}
	if dd, err := time.ParseDuration(def); err == nil {
		sd, err := time.ParseDuration(units.Replace(said))
		return err == nil && sd == dd
	}
	if dn, err := strconv.ParseFloat(def, 64); err == nil {
		sn, err := strconv.ParseFloat(strings.ReplaceAll(said, ",", ""), 64)
		return err == nil && sn == dn
	}
	return false
}
