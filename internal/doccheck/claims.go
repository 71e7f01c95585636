package doccheck

import (
	"regexp"
	"slices"
	"strings"
)

// Claims about sets of subcommands that the reference decides: which
// print JSON, which open the database, which settings break the
// ORDERFLOW_<SUBCOMMAND>_<FLAG> rule, which consents are flags only. Each
// check returns its findings and how many claims it read, so that a test
// can tell a check that found its sentence from one that matched nothing.

var (
	jsonClaim     = regexp.MustCompile("JSON with `-json`[^\\n]*(?:\\n  [^\\n]*)*")
	noDBClaim     = regexp.MustCompile(`(?is)every (?:other )?subcommand[^.]*?(?:schema|migrate)[^.]*\.(?:[^.]*\bnot open\b[^.]*\.)?`)
	ruleClaim     = regexp.MustCompile("(?s)`ORDERFLOW_<SUBCOMMAND>_<FLAG>`.*?(?:\\n\\n|$)")
	consentsClaim = regexp.MustCompile(`(?s)consents\s+are\s+flags\s+only.*?(?:\n\n|$)`)
	codeSpan      = regexp.MustCompile("`([^`]+)`")
)

// names returns the subcommands and flags a passage names in code font,
// in order: "dlq list", "prune -yes", "-force" (the flag of the
// subcommand named last).
func (r Reference) names(passage string) (subs []string, flags [][2]string) {
	known := r.Subcommands()
	current := ""
	for _, m := range codeSpan.FindAllStringSubmatch(strings.Join(strings.Fields(passage), " "), -1) {
		w := strings.Fields(m[1])
		if len(w) > 0 && w[0] == "orderflow" {
			w = w[1:]
		}
		if len(w) == 0 {
			continue
		}
		if known[w[0]] {
			current = w[0]
			w = w[1:]
			if len(w) > 0 && known[current+" "+w[0]] {
				current += " " + w[0]
				w = w[1:]
			}
			subs = append(subs, current)
		}
		if len(w) > 0 && strings.HasPrefix(w[0], "-") {
			flags = append(flags, [2]string{current, strings.TrimPrefix(w[0], "-")})
		}
	}
	return subs, flags
}

// CheckJSONClaim checks the claim that every subcommand prints JSON with
// -json but those it names: the named ones are exactly those whose -json
// is not a boolean.
func (r Reference) CheckJSONClaim(p Page) ([]Finding, int) {
	var out []Finding
	n := 0
	for _, m := range jsonClaim.FindAllStringIndex(p.Body, -1) {
		text := p.Body[m[0]:m[1]]
		_, after, ok := strings.Cut(text, "except")
		if !ok {
			continue
		}
		n++
		named, _ := r.names(after)
		want := r.subcommandsWhere(func(p Program) bool {
			s, ok := p.Setting("json")
			return !ok || s.Default != "false"
		})
		if missing, extra := diff(want, named); len(missing)+len(extra) > 0 {
			out = append(out, p.finding(m[0], "-json: the subcommands whose -json prints no JSON to stdout are %s; the page names %s as exceptions",
				strings.Join(want, ", "), strings.Join(uniq(named), ", ")))
		}
	}
	return out, n
}

// CheckDatabaseClaims checks each claim that every (other) subcommand
// checks the schema at start: it must name the subcommands that never
// open the database (no DATABASE_URL among their settings).
func (r Reference) CheckDatabaseClaims(p Page) ([]Finding, int) {
	var out []Finding
	n := 0
	noDB := r.subcommandsWhere(func(p Program) bool {
		for _, s := range p.Settings {
			if s.Env == "DATABASE_URL" {
				return false
			}
		}
		return true
	})
	for _, m := range noDBClaim.FindAllStringIndex(p.Body, -1) {
		text := strings.Join(strings.Fields(p.Body[m[0]:m[1]]), " ")
		if !strings.Contains(text, "check") && !strings.Contains(text, "read the schema") {
			continue
		}
		n++
		named, _ := r.names(text)
		if missing, _ := diff(noDB, named); len(missing) > 0 {
			out = append(out, p.finding(m[0], "a claim that every subcommand checks the schema at start, without naming those that never open the database: %s",
				strings.Join(missing, ", ")))
		}
	}
	return out, n
}

// CheckVariableRuleClaim checks the exceptions a page lists to the rule
// that each subcommand setting is -FLAG and ORDERFLOW_<SUBCOMMAND>_<FLAG>:
// every setting with another variable is named (by its variable or a
// prefix VARIABLE_*), and every flag-only setting by its subcommand and
// flag.
func (r Reference) CheckVariableRuleClaim(p Page) ([]Finding, int) {
	var out []Finding
	n := 0
	for _, m := range ruleClaim.FindAllStringIndex(p.Body, -1) {
		n++
		text := p.Body[m[0]:m[1]]
		_, flags := r.names(text)
		vars := map[string]bool{}
		for _, s := range codeSpan.FindAllStringSubmatch(text, -1) {
			vars[s[1]] = true
		}
		var missing []string
		for _, prog := range r.Programs {
			sub := prog.Subcommand()
			if sub == "" {
				continue
			}
			for _, s := range prog.Settings {
				if s.Shared {
					continue
				}
				switch {
				case s.Env == "":
					if !slices.Contains(flags, [2]string{sub, s.Flag}) {
						missing = append(missing, sub+" -"+s.Flag+" (a flag only)")
					}
				case s.Env != ruleVariable(sub, s.Flag) && !coveredVariable(vars, s.Env):
					missing = append(missing, sub+" -"+s.Flag+" ("+s.Env+")")
				}
			}
		}
		if len(missing) > 0 {
			out = append(out, p.finding(m[0], "the exceptions to ORDERFLOW_<SUBCOMMAND>_<FLAG> leave out %s", strings.Join(uniq(missing), ", ")))
		}
	}
	return out, n
}

// ruleVariable is the variable the rule gives a subcommand's flag.
func ruleVariable(sub, flag string) string {
	return "ORDERFLOW_" + strings.ToUpper(strings.ReplaceAll(sub, " ", "_")+"_"+strings.ReplaceAll(flag, "-", "_"))
}

func coveredVariable(named map[string]bool, env string) bool {
	for v := range named {
		if v == env || (strings.HasSuffix(v, "_*") && strings.HasPrefix(env, strings.TrimSuffix(v, "*"))) {
			return true
		}
	}
	return false
}

// CheckConsentsClaim checks a page's list of the consents that are flags
// only: exactly the boolean flag-only settings of the subcommands.
func (r Reference) CheckConsentsClaim(p Page) ([]Finding, int) {
	var out []Finding
	n := 0
	var want []string
	for _, prog := range r.Programs {
		for _, s := range prog.Settings {
			if sub := prog.Subcommand(); sub != "" && s.Env == "" && s.Default == "false" {
				want = append(want, sub+" -"+s.Flag)
			}
		}
	}
	slices.Sort(want)
	for _, m := range consentsClaim.FindAllStringIndex(p.Body, -1) {
		n++
		_, flags := r.names(p.Body[m[0]:m[1]])
		var named []string
		for _, f := range flags {
			named = append(named, f[0]+" -"+f[1])
		}
		if missing, extra := diff(want, named); len(missing)+len(extra) > 0 {
			out = append(out, p.finding(m[0], "the flag-only consents are %s; the page lists %s", strings.Join(want, ", "), strings.Join(uniq(named), ", ")))
		}
	}
	return out, n
}

// diff returns what want has and got lacks, and what got has beyond want.
func diff(want, got []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range uniq(slices.Clone(got)) {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	return missing, extra
}
