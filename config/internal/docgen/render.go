package main

import (
	_ "embed"
	"fmt"
	"io"
	"slices"
	"strings"
)

// header opens the reference.
//
//go:embed header.md
var header string

// render writes the reference of cmds: the settings several programs
// share, then each command's own.
func render(w io.Writer, cmds []usage) {
	shared := sharedSettings(cmds)
	_, _ = io.WriteString(w, header+"\n")
	fmt.Fprint(w, "Programs: [shared settings](#shared-settings)")
	for _, c := range cmds {
		fmt.Fprintf(w, ", [%s](#%s)", c.Name, strings.ReplaceAll(c.Name, " ", "-"))
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintln(w, "\n## Shared settings")
	fmt.Fprintln(w, "\nThe same in every program that reads them; each program's section names those it reads.")
	fmt.Fprintln(w)
	table(w, shared)
	for _, c := range cmds {
		fmt.Fprintf(w, "\n## %s\n\n%s\n", c.Name, synopsis(c.Synopsis))
		var own, common []setting
		for _, s := range c.Settings {
			if slices.Contains(shared, s) {
				common = append(common, s)
			} else {
				own = append(own, s)
			}
		}
		if len(common) > 0 {
			names := make([]string, len(common))
			for i, s := range common {
				names[i] = "`" + s.Env + "`"
			}
			fmt.Fprintf(w, "\nShared settings it reads: %s.\n", strings.Join(names, ", "))
		}
		if len(own) > 0 {
			fmt.Fprintln(w)
			table(w, own)
		}
	}
}

// sharedSettings are the settings that more than one program lists with
// the same flag, variable, default and usage, in the order of first
// appearance.
func sharedSettings(cmds []usage) []setting {
	programs := map[setting]map[string]bool{}
	var order []setting
	for _, c := range cmds {
		prog, _, _ := strings.Cut(c.Name, " ")
		for _, s := range c.Settings {
			if programs[s] == nil {
				programs[s] = map[string]bool{}
				order = append(order, s)
			}
			programs[s][prog] = true
		}
	}
	var out []setting
	for _, s := range order {
		if len(programs[s]) > 1 && s.Env != "" {
			out = append(out, s)
		}
	}
	return out
}

// table writes settings as a Markdown table.
func table(w io.Writer, settings []setting) {
	fmt.Fprintln(w, "| Variable | Flag | Default | Meaning |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, s := range settings {
		env := "*flag only*"
		if s.Env != "" {
			env = "`" + s.Env + "`"
		}
		if s.Secret {
			env += " (secret)"
		}
		def := "—"
		if s.Default != "" {
			def = "`" + cell(s.Default) + "`"
		}
		fmt.Fprintf(w, "| %s | `-%s` | %s | %s |\n", env, s.Flag, def, text(s.Usage))
	}
}

// synopsis renders "cmd [flags]   (what it does)" as "`cmd [flags]`: what
// it does."
func synopsis(s string) string {
	use, what, ok := strings.Cut(s, "   (")
	if !ok {
		return "`" + s + "`"
	}
	return "`" + use + "`: " + text(strings.TrimSuffix(what, ")")) + "."
}

// cell escapes the table's separator.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// text escapes what Markdown would read as markup in a usage text.
func text(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`, "`", "\\`").Replace(s)
}
