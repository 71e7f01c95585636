package doccheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TemporalCLI is the command tree of one release of the Temporal CLI:
// each command ("temporal worker deployment describe") with the options
// it takes, its ancestors' included.
type TemporalCLI struct {
	Version  string
	commands map[string]map[string]bool
}

var pinnedTemporal = regexp.MustCompile(`(?m)^TEMPORAL_VERSION=([0-9.]+)$`)

// PinnedTemporalVersion returns the CLI version the local stack builds
// (scripts/stack/temporal.sh).
func PinnedTemporalVersion(temporalSh string) (string, error) {
	m := pinnedTemporal.FindStringSubmatch(temporalSh)
	if m == nil {
		return "", fmt.Errorf("no TEMPORAL_VERSION=... line in scripts/stack/temporal.sh")
	}
	return m[1], nil
}

// LoadTemporalCLI reads the command tree of the CLI's version from its
// module source, temporalcli/commandsgen/commands.yml, the file its
// commands and their help are generated from. `go mod download` finds the
// module in the module cache (where `make up` put it when it built the
// CLI) or fetches it from the module proxy; no service is needed.
func LoadTemporalCLI(ctx context.Context, version string) (TemporalCLI, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/temporalio/cli@v"+version).Output()
	if err != nil {
		return TemporalCLI{}, fmt.Errorf("go mod download github.com/temporalio/cli@v%s: %w", version, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return TemporalCLI{}, fmt.Errorf("read go mod download's answer: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return TemporalCLI{}, fmt.Errorf("go mod download github.com/temporalio/cli@v%s: %s", version, mod.Error)
	}
	b, err := os.ReadFile(filepath.Join(mod.Dir, "temporalcli", "commandsgen", "commands.yml"))
	if err != nil {
		return TemporalCLI{}, fmt.Errorf("the CLI's command list: %w", err)
	}
	cli, err := ParseTemporalCommands(b)
	cli.Version = version
	return cli, err
}

// ParseTemporalCommands reads the CLI's commands.yml.
func ParseTemporalCommands(b []byte) (TemporalCLI, error) {
	type option struct {
		Name    string   `yaml:"name"`
		Short   string   `yaml:"short"`
		Aliases []string `yaml:"aliases"`
	}
	var f struct {
		Commands []struct {
			Name       string   `yaml:"name"`
			Options    []option `yaml:"options"`
			OptionSets []string `yaml:"option-sets"`
		} `yaml:"commands"`
		OptionSets []struct {
			Name    string   `yaml:"name"`
			Options []option `yaml:"options"`
		} `yaml:"option-sets"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return TemporalCLI{}, fmt.Errorf("read the CLI's commands: %w", err)
	}
	sets := map[string][]option{}
	for _, s := range f.OptionSets {
		sets[s.Name] = s.Options
	}
	own := map[string][]option{}
	for _, c := range f.Commands {
		opts := c.Options
		for _, s := range c.OptionSets {
			opts = append(opts, sets[s]...)
		}
		own[c.Name] = opts
	}
	cli := TemporalCLI{commands: map[string]map[string]bool{}}
	for name := range own {
		opts := map[string]bool{"help": true, "h": true}
		parts := strings.Fields(name)
		for i := 1; i <= len(parts); i++ {
			for _, o := range own[strings.Join(parts[:i], " ")] {
				opts[o.Name] = true
				if o.Short != "" {
					opts[o.Short] = true
				}
				for _, a := range o.Aliases {
					opts[a] = true
				}
			}
		}
		cli.commands[name] = opts
	}
	if len(cli.commands) < 10 {
		return cli, fmt.Errorf("read %d commands: is this the CLI's commands.yml?", len(cli.commands))
	}
	return cli, nil
}

var cliWord = regexp.MustCompile(`^[a-z][a-z-]*$`)

// CheckTemporal checks every `temporal ...` command a page shows: its
// subcommands are commands of the CLI, and its options are options of
// that command.
func (t TemporalCLI) CheckTemporal(p Page) []Finding {
	var out []Finding
	for _, c := range p.Code() {
		w := words(c.Text)
		for i := range w {
			if w[i] != "temporal" || i+1 >= len(w) || !cliWord.MatchString(w[i+1]) {
				continue
			}
			cmd := "temporal"
			j := i + 1
			for ; j < len(w) && cliWord.MatchString(w[j]); j++ {
				if _, ok := t.commands[cmd+" "+w[j]]; !ok {
					break
				}
				cmd += " " + w[j]
			}
			if j < len(w) && cliWord.MatchString(w[j]) && t.isGroup(cmd) {
				out = append(out, p.finding(c.Offset, "`%s`: the Temporal CLI %s has no command %s %s", c.Text, t.Version, cmd, w[j]))
				break
			}
			for ; j < len(w); j++ {
				if w[j] == "|" || w[j] == "&&" || w[j] == ";" {
					break
				}
				name, ok := strings.CutPrefix(w[j], "--")
				if !ok {
					if name, ok = strings.CutPrefix(w[j], "-"); !ok || len(name) != 1 {
						continue
					}
				}
				name, _, _ = strings.Cut(name, "=")
				if !t.commands[cmd][name] {
					out = append(out, p.finding(c.Offset, "`%s`: %s (CLI %s) has no option --%s", c.Text, cmd, t.Version, name))
				}
			}
			break
		}
	}
	return out
}

// isGroup reports whether the command has subcommands.
func (t TemporalCLI) isGroup(cmd string) bool {
	for name := range t.commands {
		if strings.HasPrefix(name, cmd+" ") {
			return true
		}
	}
	return false
}
