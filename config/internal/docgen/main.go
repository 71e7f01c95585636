// Command docgen writes docs/configuration.md, the reference of every
// setting of orderflow's programs. It builds the worker, the bridge
// (starter) and the orderflow command, runs each program and subcommand
// with -h, reads the settings that package config prints there (flag,
// variable, default, meaning) and renders them as Markdown. The meaning of
// a setting is its usage text in the code: to change the reference, change
// the code and run `go generate ./config`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// target is the reference's path in the module.
const target = "docs/configuration.md"

func main() {
	out := flag.String("o", "", "file to write (default: "+target+" of the module)")
	flag.Parse()
	if err := run(context.Background(), *out); err != nil {
		slog.Error("docgen failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	doc, err := generate(ctx)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(root, target)
	}
	if err := os.WriteFile(out, doc, 0o644); err != nil {
		return fmt.Errorf("write the reference: %w", err)
	}
	return nil
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// generate builds the programs, reads their usage and returns the reference.
func generate(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "orderflow-docgen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := build(ctx, dir); err != nil {
		return nil, err
	}
	if err := checkSubcommands(ctx, dir); err != nil {
		return nil, err
	}
	var cmds []usage
	for _, c := range commands {
		text, err := help(ctx, dir, c)
		if err != nil {
			return nil, err
		}
		u, err := parseUsage(text)
		if err != nil {
			return nil, fmt.Errorf("%s -h: %w", c.title(), err)
		}
		u.Name = c.title()
		cmds = append(cmds, u)
	}
	var b bytes.Buffer
	render(&b, cmds)
	return b.Bytes(), nil
}

// build compiles the programs into dir, in one go build.
func build(ctx context.Context, dir string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, modulePath+"/"+p.pkg)
	}
	if b, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// help runs the command with -h in an empty environment (a variable with
// a bad value would stop it before the usage) and returns what it printed.
func help(ctx context.Context, dir string, c command) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, c.program), append(c.args, "-h")...)
	cmd.Env = []string{}
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -h: %w\n%s", c.title(), err, b)
	}
	return string(b), nil
}
