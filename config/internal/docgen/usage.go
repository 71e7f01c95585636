package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// setting is one setting as a program's usage lists it.
type setting struct {
	Flag, Env, Default, Usage string
	Secret                    bool
}

// usage is one command's usage text, read.
type usage struct {
	// Name is the command ("orderflow dlq list").
	Name string
	// Synopsis is the first line without "Usage: ".
	Synopsis string
	Settings []setting
}

// notes matches the parenthesis package config appends to a setting's
// usage: "env X", "secret" and "default D", those that apply, joined by
// "; ". The first group is greedy, so that a usage text that ends in a
// parenthesis of its own keeps it.
var notes = regexp.MustCompile(`^(.*) \((?:env ([A-Z][A-Z0-9_]*))?(?:; )?(secret)?(?:; )?(?:default (.*))?\)$`)

// parseUsage reads the usage text package config prints for -h:
//
//	Usage: SYNOPSIS
//
//	Every flag can also be set ...
//
//	  -flag
//	    	usage (env VARIABLE; default VALUE)
func parseUsage(text string) (usage, error) {
	var u usage
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	first, ok := strings.CutPrefix(lines[0], "Usage: ")
	if !ok {
		return u, fmt.Errorf("no usage line: %q", lines[0])
	}
	u.Synopsis = first
	for _, line := range lines[1:] {
		switch {
		case strings.HasPrefix(line, "  -"):
			u.Settings = append(u.Settings, setting{Flag: strings.TrimPrefix(line, "  -")})
		case strings.HasPrefix(line, "    \t"):
			if len(u.Settings) == 0 || u.Settings[len(u.Settings)-1].Usage != "" {
				return u, fmt.Errorf("usage text without its flag: %q", line)
			}
			u.Settings[len(u.Settings)-1] = withUsage(u.Settings[len(u.Settings)-1], strings.TrimPrefix(line, "    \t"))
		}
	}
	if len(u.Settings) == 0 {
		return u, errors.New("no settings listed")
	}
	for _, s := range u.Settings {
		if s.Usage == "" {
			return u, fmt.Errorf("-%s has no usage text", s.Flag)
		}
	}
	return u, nil
}

// withUsage sets s's usage, variable, default and secrecy from its usage
// line.
func withUsage(s setting, line string) setting {
	s.Usage = line
	m := notes.FindStringSubmatch(line)
	if m == nil || (m[2] == "" && m[3] == "" && m[4] == "") {
		return s
	}
	s.Usage, s.Env, s.Secret, s.Default = m[1], m[2], m[3] != "", m[4]
	return s
}
