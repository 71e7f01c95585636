package doccheck

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Compose is what docker-compose.yml defines: its services and profiles.
type Compose struct {
	Services map[string]bool
	Profiles map[string]bool
}

// ParseCompose reads a compose file's services and their profiles.
func ParseCompose(text string) (Compose, error) {
	var f struct {
		Services map[string]struct {
			Profiles []string `yaml:"profiles"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(text), &f); err != nil {
		return Compose{}, fmt.Errorf("read the compose file: %w", err)
	}
	c := Compose{Services: map[string]bool{}, Profiles: map[string]bool{}}
	for name, s := range f.Services {
		c.Services[name] = true
		for _, p := range s.Profiles {
			c.Profiles[p] = true
		}
	}
	if len(c.Services) == 0 {
		return c, fmt.Errorf("the compose file defines no service")
	}
	return c, nil
}

// composeOptionsWithValue are the docker compose options, global and of
// its subcommands, that take the next word as their value.
var composeOptionsWithValue = map[string]bool{
	"-f": true, "--file": true, "-p": true, "--project-name": true, "--profile": true, "--env-file": true,
	"-e": true, "--env": true, "-u": true, "--user": true, "-w": true, "--workdir": true, "--entrypoint": true,
	"--name": true, "-t": true, "--timeout": true, "--scale": true, "--index": true, "-l": true, "--label": true,
}

// composeOneService are the subcommands that take one service, then its
// command; the others take a list of services.
var composeOneService = map[string]bool{"run": true, "exec": true, "cp": true, "port": true}

var hostPort = regexp.MustCompile(`^(?:[a-z]+://)?([a-z][a-z0-9-]*):[0-9]+`)

// CheckCompose checks every `docker compose` command a page shows: each
// service and profile it names is one of the compose file's, and so is
// the host of an address given to it in a variable
// (`OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose ...`).
func (c Compose) CheckCompose(p Page) []Finding {
	var out []Finding
	for _, code := range p.Code() {
		w := words(code.Text)
		for i := 0; i+1 < len(w); i++ {
			if w[i] != "docker" || w[i+1] != "compose" {
				continue
			}
			for _, v := range w[:i] {
				name, val, ok := strings.Cut(v, "=")
				if !ok || strings.ToUpper(name) != name {
					continue
				}
				if m := hostPort.FindStringSubmatch(val); m != nil && !c.Services[m[1]] && m[1] != "localhost" {
					out = append(out, p.finding(code.Offset, "`%s`: %s names the host %s, which is no service of docker-compose.yml", code.Text, name, m[1]))
				}
			}
			verb := ""
			for j := i + 2; j < len(w); j++ {
				a := w[j]
				if a == "|" || a == "&&" || a == ";" {
					break
				}
				if strings.HasPrefix(a, "-") {
					if !strings.Contains(a, "=") && composeOptionsWithValue[a] && j+1 < len(w) {
						if a == "--profile" && !c.Profiles[w[j+1]] {
							out = append(out, p.finding(code.Offset, "`%s`: docker-compose.yml has no profile %s", code.Text, w[j+1]))
						}
						j++
					}
					continue
				}
				if verb == "" {
					verb = a
					continue
				}
				if !c.Services[a] {
					out = append(out, p.finding(code.Offset, "`%s`: docker-compose.yml has no service %s", code.Text, a))
				}
				if composeOneService[verb] {
					break
				}
			}
		}
	}
	return out
}

// Values is a Helm chart's values.yaml, parsed.
type Values struct {
	root map[string]any
}

// ParseValues reads a values.yaml.
func ParseValues(text string) (Values, error) {
	var v map[string]any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		return Values{}, fmt.Errorf("read the values: %w", err)
	}
	if len(v) == 0 {
		return Values{}, fmt.Errorf("no values")
	}
	return Values{root: v}, nil
}

var (
	valueKey = regexp.MustCompile(`^(\*|[a-z][A-Za-z0-9]*)((?:\.(?:\*|[A-Za-z_][A-Za-z0-9_]*))+)(?:=.*)?$`)
	upper    = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// Has reports whether key ("worker.versioning.builds", "worker.env.*",
// "*.resources") names a value: "*" stands for any key, an empty map or a
// map of variables takes any variable name.
func (v Values) Has(key string) bool {
	return has(v.root, strings.Split(key, "."))
}

func has(node any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	m, ok := node.(map[string]any)
	if !ok {
		return false
	}
	if path[0] == "*" {
		for _, child := range m {
			if has(child, path[1:]) {
				return true
			}
		}
		return false
	}
	child, ok := m[path[0]]
	if !ok {
		if len(path) == 1 && (len(m) == 0 || upper.MatchString(path[0])) {
			return true
		}
		return false
	}
	return has(child, path[1:])
}

// CheckValues checks every value key a page names: in code font
// (`worker.versioning.unversioned`, `secrets.create=false`) when its first
// part is a top-level key of the values, and after --set, --set-string,
// --set-file or --set-json in a command.
func (v Values) CheckValues(p Page) []Finding {
	var out []Finding
	for _, c := range p.Code() {
		var keys []string
		w := words(c.Text)
		for i, a := range w {
			switch a {
			case "--set", "--set-string", "--set-file", "--set-json", "--set-literal":
				if i+1 < len(w) {
					kvs := []string{w[i+1]}
					if a == "--set" || a == "--set-string" {
						kvs = strings.Split(w[i+1], ",")
					}
					for _, kv := range kvs {
						if k, _, ok := strings.Cut(kv, "="); ok {
							keys = append(keys, k)
						}
					}
				}
			}
		}
		if m := valueKey.FindStringSubmatch(c.Text); m != nil && !c.Fenced {
			if _, top := v.root[m[1]]; top || m[1] == "*" {
				keys = append(keys, m[1]+m[2])
			}
		}
		for _, k := range uniq(keys) {
			if !v.Has(k) {
				out = append(out, p.finding(c.Offset, "`%s`: the chart's values.yaml has no %s", c.Text, k))
			}
		}
	}
	return out
}
