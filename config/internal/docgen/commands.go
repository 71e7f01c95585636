package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

const modulePath = "github.com/orderflow/orderflow"

// programs are the binaries whose settings the reference lists.
var programs = []struct{ name, pkg string }{
	{"worker", "worker"},
	{"starter", "starter"},
	{"orderflow", "cmd/orderflow"},
}

// command is one program, or one subcommand of the orderflow command.
type command struct {
	program string
	args    []string
}

func (c command) title() string { return strings.Join(append([]string{c.program}, c.args...), " ") }

// commands are the reference's sections, in its order. checkSubcommands
// fails when the orderflow command lists a subcommand missing here.
var commands = []command{
	{"worker", nil},
	{"starter", nil},
	{"orderflow", []string{"migrate"}},
	{"orderflow", []string{"publish"}},
	{"orderflow", []string{"check"}},
	{"orderflow", []string{"audit"}},
	{"orderflow", []string{"why"}},
	{"orderflow", []string{"gaps"}},
	{"orderflow", []string{"lag"}},
	{"orderflow", []string{"dlq", "list"}},
	{"orderflow", []string{"dlq", "show"}},
	{"orderflow", []string{"dlq", "replay"}},
	{"orderflow", []string{"prune"}},
	{"orderflow", []string{"recover"}},
	{"orderflow", []string{"rewind"}},
}

// checkSubcommands compares the subcommands `orderflow -h` lists (lines
// "  NAME  summary") with those of commands.
func checkSubcommands(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "orderflow"), "-h")
	cmd.Env = []string{}
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("orderflow -h: %w\n%s", err, b)
	}
	known := map[string]bool{}
	for _, c := range commands {
		if c.program == "orderflow" {
			known[c.args[0]] = true
		}
	}
	var missing []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && !known[f[0]] {
			missing = append(missing, f[0])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("orderflow lists subcommands the reference does not: %s (add them to commands in %s)",
			strings.Join(missing, ", "), "config/internal/docgen/commands.go")
	}
	return nil
}
