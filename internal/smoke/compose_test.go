package smoke

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/tracing"
)

// Local ports of the stack (scripts/stack.sh and docs/design.md); docker-compose
// publishes the same ones, so the two are interchangeable for a user.
const (
	portTemporalUI = "8233"
	portBroker     = "10911"
	portWorker     = "9090"
	portBridge     = "9091"
	portProxy      = "8081" // the RocketMQ proxy's gRPC port
)

// composeServices are the services docker-compose.yml must define.
var composeServices = []string{
	"postgres", "temporal", "temporal-setup", "temporal-ui",
	"rocketmq-namesrv", "rocketmq-broker", "rocketmq-topic", "rocketmq-proxy", "redis", "migrate", "worker", "starter",
	"rocketmq-ha-namesrv", "rocketmq-ha-broker-0", "rocketmq-ha-broker-1", "rocketmq-ha-topic",
	"jaeger",
}

// repoRoot returns the repository's root directory (two levels up).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s: %v", root, err)
	}
	return root
}

// loadCompose parses a compose file with compose-spec's loader, as
// `docker compose --profile ha --profile tracing` does, with the variables
// env (KEY=value) instead of the caller's environment.
func loadCompose(t *testing.T, root, file string, env ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(root),
		cli.WithName("orderflow"),
		cli.WithProfiles([]string{"ha", "tracing"}),
		cli.WithEnv(env),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// TestDockerCompose parses docker-compose.yml and checks it against the
// code's defaults: services, published ports, the worker's and bridge's
// environment, and the files it mounts and builds from.
func TestDockerCompose(t *testing.T) {
	root := repoRoot(t)
	p, err := loadCompose(t, root, filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	for _, problem := range composeProblems(root, p) {
		t.Error(problem)
	}
	for _, problem := range tracingProblems(t, root, filepath.Join(root, "docker-compose.yml")) {
		t.Error(problem)
	}
}

// TestDockerComposeCheckFindsMistakes feeds the check mistaken variants of
// docker-compose.yml, so that a passing TestDockerCompose means something.
func TestDockerComposeCheckFindsMistakes(t *testing.T) {
	root := repoRoot(t)
	orig, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, old, new, want string
	}{
		{"wrong task queue", "ORDERFLOW_TASK_QUEUE: orderflow", "ORDERFLOW_TASK_QUEUE: orders", "ORDERFLOW_TASK_QUEUE"},
		{"wrong database password", "orderflow:orderflow@postgres", "orderflow:secret@postgres", "DATABASE_URL"},
		{"worker and bridge as the owner", "orderflow_app:orderflow_app@postgres", "orderflow:orderflow@postgres", "connects as the owner"},
		{"runtime role init.sql does not make", "orderflow_app:orderflow_app@postgres", "orderflow_app:secret@postgres", "init.sql lacks"},
		{"worker before the migration", "      migrate:\n        condition: service_completed_successfully\n", "", "service worker: want depends_on migrate"},
		{"bridge not waiting for the migration to succeed", "      migrate:\n        condition: service_completed_successfully\n      temporal-setup:\n        condition: service_completed_successfully\n      rocketmq-topic", "      migrate:\n        condition: service_started\n      temporal-setup:\n        condition: service_completed_successfully\n      rocketmq-topic", "service starter: want depends_on migrate"},
		{"migrate as the runtime role", "      DATABASE_URL: postgres://orderflow:orderflow@postgres", "      DATABASE_URL: postgres://orderflow_app:orderflow_app@postgres", "service migrate"},
		{"migrate service not migrating", `command: ["./orderflow", "migrate"]`, `command: ["./worker"]`, "service migrate: command"},
		{"name server port", "ROCKETMQ_NAMESRV:-rocketmq-namesrv:9876}", "ROCKETMQ_NAMESRV:-rocketmq-namesrv:9877}", "ROCKETMQ_NAMESRV"},
		{"replica without controller mode", "./deploy/rocketmq/broker-ha-1-compose.conf", "./deploy/rocketmq/broker-compose.conf", "enableControllerMode"},
		{"name server without controller", "./deploy/rocketmq/namesrv-ha-compose.conf", "./deploy/rocketmq/broker-ha-0-compose.conf", "enableControllerInNamesrv"},
		{"unknown temporal host", "TEMPORAL_ADDRESS: temporal:7233\n  TEMPORAL_NAMESPACE", "TEMPORAL_ADDRESS: temporal-frontend:7233\n  TEMPORAL_NAMESPACE", "TEMPORAL_ADDRESS"},
		{"UI port", `"127.0.0.1:8233:8080"`, `"127.0.0.1:8080:8080"`, "temporal-ui"},
		{"topic", "-t ORDER_EVENTS", "-t ORDERS", "ORDER_EVENTS"},
		{"topic of one message type", "-r 8 -w 8 -a +message.type=MIXED", "-r 8 -w 8", "MIXED"},
		{"replicated topic with an attribute", "-c DefaultCluster -t ORDER_EVENTS -r 8 -w 8\n", "-c DefaultCluster -t ORDER_EVENTS -r 8 -w 8 -a +message.type=MIXED\n", "rocketmq-ha-topic"},
		{"proxy on another name server", `"-n", "${ROCKETMQ_NAMESRV:-rocketmq-namesrv:9876}"`, `"-n", "rocketmq-namesrv:9877"`, "rocketmq-proxy"},
		{"proxy port not published", `"127.0.0.1:8081:8081"`, `"127.0.0.1:8082:8081"`, "rocketmq-proxy"},
		{"search attribute", "--name OrderStatus", "--name Status", "OrderStatus"},
		{"worker command", `command: ["./worker"]`, `command: ["./bridge"]`, "worker"},
		{"redis port", "@redis:6379/0", "@redis:6380/0", "REDIS_URL"},
		{"redis host", "@redis:6379/0", "@cache:6379/0", "REDIS_URL"},
		{"redis published port", `"127.0.0.1:6379:6379"`, `"127.0.0.1:6380:6379"`, "service redis"},
		{"bridge without redis", "      REDIS_URL: redis://:${REDIS_PASSWORD:-orderflow}@redis:6379/0\n", "", "REDIS_URL"},
		{"redis without a password", `"--requirepass", "${REDIS_PASSWORD:-orderflow}", `, "", "requirepass"},
		{"bridge without the redis password", "redis://:${REDIS_PASSWORD:-orderflow}@redis", "redis://redis", "REDIS_URL"},
		{"bridge with another redis password", "redis://:${REDIS_PASSWORD:-orderflow}@redis", "redis://:other@redis", "REDIS_URL"},
		{"postgres on every interface", `"127.0.0.1:5432:5432"`, `"5432:5432"`, "service postgres: port"},
		{"UI on every interface", `"127.0.0.1:8233:8080"`, `"0.0.0.0:8233:8080"`, "service temporal-ui: port"},
		{"redis on every interface", `"127.0.0.1:6379:6379"`, `"6379:6379"`, "service redis: port"},
		{"name server on every interface", `"127.0.0.1:9876:9876"`, `"9876:9876"`, "service rocketmq-namesrv: port"},
		{"publish without -allow-remote", "./orderflow publish -allow-remote", "./orderflow publish", "-allow-remote"},
		{"tracing on by default", "${OTEL_EXPORTER_OTLP_ENDPOINT:-}", "${OTEL_EXPORTER_OTLP_ENDPOINT:-http://jaeger:4318}", "on by default"},
		{"trace backend outside the profile", "    profiles: [\"tracing\"]\n    image: jaegertracing", "    image: jaegertracing", "profile"},
		{"grpc on the HTTP port", "${OTEL_EXPORTER_OTLP_PROTOCOL:-http/protobuf}", "${OTEL_EXPORTER_OTLP_PROTOCOL:-grpc}", "4317"},
		{"OTLP port not published", `"127.0.0.1:4318:4318"`, `"127.0.0.1:4319:4319"`, "4318"},
		{"tracing undocumented", "OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose --profile tracing", "docker compose --profile tracing", "document"},
		{"unknown trace backend", "OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose", "OTEL_EXPORTER_OTLP_ENDPOINT=http://tempo:4318 docker compose", "tempo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(orig), tc.old) {
				t.Fatalf("docker-compose.yml no longer contains %q; update this case", tc.old)
			}
			mutated := strings.Replace(string(orig), tc.old, tc.new, 1)
			// Relative paths resolve against the repository root, the
			// project directory given to the loader.
			f := filepath.Join(t.TempDir(), "docker-compose.yml")
			if err := os.WriteFile(f, []byte(mutated), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := loadCompose(t, root, f)
			if err != nil {
				t.Fatalf("mutated file does not load: %v", err)
			}
			problems := append(composeProblems(root, p), tracingProblems(t, root, f)...)
			for _, pr := range problems {
				if strings.Contains(pr, tc.want) {
					return
				}
			}
			t.Fatalf("check missed the mistake (want a problem mentioning %q); problems: %q", tc.want, problems)
		})
	}
}

// composeProblems lists every way p disagrees with the code's defaults.
func composeProblems(root string, p *types.Project) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	for _, name := range composeServices {
		if _, ok := p.Services[name]; !ok {
			bad("service %s missing", name)
		}
	}
	if len(out) > 0 {
		return out
	}
	def := config.Defaults()
	dbDefault, err := url.Parse(def.DatabaseURL)
	if err != nil {
		return []string{fmt.Sprintf("config's default DATABASE_URL does not parse: %v", err)}
	}
	redisDefault, err := url.Parse(def.RedisURL)
	if err != nil {
		return []string{fmt.Sprintf("config's default REDIS_URL does not parse: %v", err)}
	}

	// Published ports: the same as the local stack's.
	publishes := func(svc, published, target string) {
		for _, port := range p.Services[svc].Ports {
			if port.Published == published && strconv.Itoa(int(port.Target)) == target {
				return
			}
		}
		bad("service %s: want port %s published to container port %s, have %v", svc, published, target, p.Services[svc].Ports)
	}
	publishes("postgres", dbDefault.Port(), "5432")
	publishes("temporal", portOf(def.TemporalAddress), "7233")
	publishes("temporal-ui", portTemporalUI, "8080")
	publishes("rocketmq-namesrv", portOf(def.RocketMQNamesrv), "9876")
	publishes("rocketmq-broker", portBroker, portBroker)
	publishes("worker", portWorker, portWorker)
	publishes("starter", portBridge, portBridge)
	publishes("redis", redisDefault.Port(), "6379")
	out = append(out, loopbackProblems(p)...)
	for _, f := range p.ComposeFiles {
		out = append(out, publishCommandProblems(f)...)
	}

	// PostgreSQL creates the role and database of DATABASE_URL.
	pg := env(p, "postgres")
	pass, _ := dbDefault.User.Password()
	for k, want := range map[string]string{
		"POSTGRES_USER":     dbDefault.User.Username(),
		"POSTGRES_PASSWORD": pass,
		"POSTGRES_DB":       strings.TrimPrefix(dbDefault.Path, "/"),
	} {
		if pg[k] != want {
			bad("service postgres: %s = %q, want %q (from config's DATABASE_URL)", k, pg[k], want)
		}
	}

	// Worker and bridge: every setting of package config, pointing at the
	// compose services on the default ports, with the default names.
	for _, svc := range []string{"worker", "starter"} {
		e := env(p, svc)
		for _, s := range config.Core() {
			v, ok := e[s.Env]
			if !ok {
				bad("service %s: %s not set", svc, s.Env)
				continue
			}
			switch s.Env {
			case "TEMPORAL_ADDRESS":
				checkHostPort(p, &out, svc, s.Env, v, "temporal", portOf(s.Default))
			case "ROCKETMQ_NAMESRV":
				checkHostPort(p, &out, svc, s.Env, v, "rocketmq-namesrv", portOf(s.Default))
			case "DATABASE_URL":
				checkRuntimeURL(root, &out, svc, v, dbDefault)
			default:
				if v != s.Default {
					bad("service %s: %s = %q, want the default %q", svc, s.Env, v, s.Default)
				}
			}
		}
		if e["ORDERFLOW_TASK_QUEUE"] != config.DefaultTaskQueue {
			bad("service %s: ORDERFLOW_TASK_QUEUE = %q, want config.DefaultTaskQueue %q", svc, e["ORDERFLOW_TASK_QUEUE"], config.DefaultTaskQueue)
		}
		sc := p.Services[svc]
		if want := []string{"./" + svc}; !slices.Equal([]string(sc.Command), want) {
			bad("service %s: command %q, want %q", svc, sc.Command, want)
		}
		if sc.Build == nil || filepath.Clean(sc.Build.Context) != root {
			bad("service %s: want build context the repository root", svc)
		}
		if _, err := os.Stat(filepath.Join(root, svc, "main.go")); err != nil {
			bad("service %s: package ./%s has no main.go: %v", svc, svc, err)
		}
		for _, dep := range []string{"postgres", "temporal-setup"} {
			if _, ok := sc.DependsOn[dep]; !ok {
				bad("service %s: want depends_on %s", svc, dep)
			}
		}
		if d, ok := sc.DependsOn["migrate"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			bad("service %s: want depends_on migrate with condition %s (it only checks the schema)", svc, types.ServiceConditionCompletedSuccessfully)
		}
	}
	out = append(out, migrateProblems(root, p, dbDefault)...)
	if _, ok := p.Services["starter"].DependsOn["rocketmq-topic"]; !ok {
		bad("service starter: want depends_on rocketmq-topic (the topic must exist before the bridge subscribes)")
	}
	// The bridge's duplicate filter uses the redis service (REDIS_URL is
	// the bridge's alone: the worker does not read it).
	if v, ok := env(p, "starter")[config.RedisURL.Env]; !ok {
		bad("service starter: %s not set (want the redis service)", config.RedisURL.Env)
	} else {
		checkRedisURL(p, &out, v, redisDefault)
	}
	if _, ok := p.Services["starter"].DependsOn["redis"]; !ok {
		bad("service starter: want depends_on redis")
	}
	if got := env(p, "worker")["ORDERFLOW_WORKER_METRICS_ADDR"]; portOf(got) != portWorker {
		bad("service worker: ORDERFLOW_WORKER_METRICS_ADDR = %q, want port %s", got, portWorker)
	}
	if got := env(p, "starter")["ORDERFLOW_BRIDGE_METRICS_ADDR"]; portOf(got) != portBridge {
		bad("service starter: ORDERFLOW_BRIDGE_METRICS_ADDR = %q, want port %s", got, portBridge)
	}

	// The Dockerfile builds both binaries the services run.
	if df, err := os.ReadFile(filepath.Join(root, "Dockerfile")); err != nil {
		bad("Dockerfile: %v", err)
	} else {
		for _, pkg := range []string{"./worker", "./starter"} {
			if !strings.Contains(string(df), pkg) {
				bad("Dockerfile does not build %s", pkg)
			}
		}
	}

	// Temporal: the UI and the setup job talk to the temporal service; the
	// setup job registers the search attribute the workflow sets.
	if got := env(p, "temporal-ui")["TEMPORAL_ADDRESS"]; got != "temporal:7233" {
		bad("service temporal-ui: TEMPORAL_ADDRESS = %q, want temporal:7233", got)
	}
	setup := strings.Join(p.Services["temporal-setup"].Command, " ")
	if !strings.Contains(setup, "--name "+api.SearchAttributeOrderStatus) || !strings.Contains(setup, "--type Keyword") {
		bad("service temporal-setup: want it to create search attribute %s of type Keyword; command %q", api.SearchAttributeOrderStatus, setup)
	}
	tmp := env(p, "temporal")
	if tmp["POSTGRES_SEEDS"] != "postgres" {
		bad("service temporal: POSTGRES_SEEDS = %q, want postgres", tmp["POSTGRES_SEEDS"])
	}
	checkTemporalDatabases(root, &out, tmp)

	// RocketMQ: the topic job creates the default topic with at least 4
	// queues, and the broker announces an address reachable in the network.
	topicCmd := strings.Join(p.Services["rocketmq-topic"].Command, " ")
	if !regexp.MustCompile(`-t ` + regexp.QuoteMeta(def.Topic) + `\b`).MatchString(topicCmd) {
		bad("service rocketmq-topic: want it to create topic %s; command %q", def.Topic, topicCmd)
	}
	for _, flag := range []string{"-r", "-w"} {
		m := regexp.MustCompile(regexp.QuoteMeta(flag) + ` (\d+)`).FindStringSubmatch(topicCmd)
		if m == nil {
			bad("service rocketmq-topic: %s (queues) missing in %q", flag, topicCmd)
		} else if n, _ := strconv.Atoi(m[1]); n < 4 {
			bad("service rocketmq-topic: %s %d, want at least 4 queues", flag, n)
		}
	}
	// The topic takes every message type, which RocketMQ 5 clients check
	// before they send FIFO or transactional messages; but not in the ha
	// profile, whose RocketMQ 5.3.3 replica would fail to copy the master's
	// topics (apache/rocketmq#9403).
	if cmd := strings.Join(p.Services["rocketmq-topic"].Command, " "); !strings.Contains(cmd, "-a +message.type=MIXED") {
		bad("service rocketmq-topic: want the topic created with -a +message.type=MIXED; command %q", cmd)
	}
	if cmd := strings.Join(p.Services["rocketmq-ha-topic"].Command, " "); strings.Contains(cmd, "message.type") {
		bad("service rocketmq-ha-topic: a topic attribute stops the 5.3.3 replica's topic sync; command %q", cmd)
	}
	// The proxy (RocketMQ 5 gRPC clients) serves the name server the
	// worker and the bridge use, and publishes its gRPC port.
	proxyCmd := strings.Join(p.Services["rocketmq-proxy"].Command, " ")
	if ns := env(p, "starter")["ROCKETMQ_NAMESRV"]; !strings.Contains(proxyCmd, "mqproxy") || !strings.Contains(proxyCmd, "-n "+ns) {
		bad("service rocketmq-proxy: want mqproxy with -n %s (the bridge's name server); command %q", ns, proxyCmd)
	}
	publishes("rocketmq-proxy", portProxy, portProxy)
	checkBrokerConf(root, p, &out)
	return out
}

// env returns a service's environment with unset values as "".
func env(p *types.Project, svc string) map[string]string {
	out := map[string]string{}
	for k, v := range p.Services[svc].Environment {
		if v != nil {
			out[k] = *v
		} else {
			out[k] = ""
		}
	}
	return out
}

func portOf(hostport string) string {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return ""
	}
	return port
}

func checkHostPort(p *types.Project, out *[]string, svc, key, v, wantHost, wantPort string) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		*out = append(*out, fmt.Sprintf("service %s: %s = %q is not host:port", svc, key, v))
		return
	}
	if _, ok := p.Services[host]; !ok || host != wantHost {
		*out = append(*out, fmt.Sprintf("service %s: %s = %q, want host %s (a compose service)", svc, key, v, wantHost))
	}
	if port != wantPort {
		*out = append(*out, fmt.Sprintf("service %s: %s = %q, want port %s (config's default)", svc, key, v, wantPort))
	}
}

// migrateProblems: the migrate service runs `orderflow migrate` from the
// image as the database's owner (config's default role, the one
// POSTGRES_USER creates) once PostgreSQL is healthy.
func migrateProblems(root string, p *types.Project, def *url.URL) []string {
	var out []string
	sc := p.Services["migrate"]
	if want := []string{"./orderflow", "migrate"}; !slices.Equal([]string(sc.Command), want) {
		out = append(out, fmt.Sprintf("service migrate: command %q, want %q", sc.Command, want))
	}
	if sc.Build == nil || filepath.Clean(sc.Build.Context) != root {
		out = append(out, "service migrate: want build context the repository root")
	}
	if d, ok := sc.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
		out = append(out, "service migrate: want depends_on postgres with condition service_healthy")
	}
	if v, ok := env(p, "migrate")["DATABASE_URL"]; !ok {
		out = append(out, "service migrate: DATABASE_URL not set (want the owner's)")
	} else {
		checkDatabaseURL(&out, "migrate", v, def)
	}
	return out
}

// checkRuntimeURL: the worker's and the bridge's DATABASE_URL is config's
// default but for its role, a runtime role other than the owner that
// deploy/postgres/init.sql creates with that password and grants data
// rights only, by the owner's default privileges.
func checkRuntimeURL(root string, out *[]string, svc, v string, def *url.URL) {
	u, err := url.Parse(v)
	if err != nil {
		*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL does not parse: %v", svc, err))
		return
	}
	owner := def.User.Username()
	role := u.User.Username()
	pass, _ := u.User.Password()
	if role == owner {
		*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL connects as the owner %s, want the runtime role (data rights only)", svc, owner))
		return
	}
	rt := *u
	rt.User = def.User
	checkDatabaseURL(out, svc, rt.String(), def)
	sql, err := os.ReadFile(filepath.Join(root, "deploy", "postgres", "init.sql"))
	if err != nil {
		*out = append(*out, fmt.Sprintf("deploy/postgres/init.sql: %v", err))
		return
	}
	var code []string
	for _, line := range strings.Split(string(sql), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			code = append(code, line)
		}
	}
	s := strings.Join(strings.Fields(strings.Join(code, " ")), " ")
	wants := []string{
		"CREATE ROLE " + role + " LOGIN PASSWORD '" + pass + "';",
		"GRANT CONNECT ON DATABASE " + strings.TrimPrefix(def.Path, "/") + " TO " + role + ";",
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + owner + " IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO " + role + ";",
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + owner + " IN SCHEMA public GRANT USAGE ON SEQUENCES TO " + role + ";",
	}
	for _, want := range wants {
		if !strings.Contains(s, want) {
			*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL's role %s: deploy/postgres/init.sql lacks %q", svc, role, want))
		}
	}
	// Nothing else names the role: no further right, membership or option.
	for _, stmt := range strings.Split(s, ";") {
		stmt = strings.TrimSpace(stmt)
		if regexp.MustCompile(`\b`+regexp.QuoteMeta(role)+`\b`).MatchString(stmt) && !slices.Contains(wants, stmt+";") {
			*out = append(*out, fmt.Sprintf("service %s: deploy/postgres/init.sql gives the runtime role %s more than data rights: %q", svc, role, stmt))
		}
	}
}

func checkDatabaseURL(out *[]string, svc, v string, def *url.URL) {
	u, err := url.Parse(v)
	if err != nil {
		*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL does not parse: %v", svc, err))
		return
	}
	defPass, _ := def.User.Password()
	pass, _ := u.User.Password()
	switch {
	case u.Scheme != def.Scheme || u.Hostname() != "postgres" || u.Port() != def.Port():
		*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL %q, want %s://…@postgres:%s", svc, v, def.Scheme, def.Port()))
	case u.User.Username() != def.User.Username() || pass != defPass || u.Path != def.Path:
		*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL %q, want the user, password and database of config's default", svc, v))
	case u.Query().Get("sslmode") != def.Query().Get("sslmode"):
		*out = append(*out, fmt.Sprintf("service %s: DATABASE_URL %q, want sslmode=%s", svc, v, def.Query().Get("sslmode")))
	}
}

// loopbackProblems: every published port is bound to 127.0.0.1, so that a
// stack with known passwords is not reachable from the network.
func loopbackProblems(p *types.Project) []string {
	var out []string
	for _, name := range sortedKeys(p.Services) {
		for _, port := range p.Services[name].Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" {
				out = append(out, fmt.Sprintf("service %s: port %s published on %q, want 127.0.0.1", name, port.Published, port.HostIP))
			}
		}
	}
	return out
}

// publishCommand finds, in the compose file's comments, the orderflow
// publish commands it shows.
var publishCommand = regexp.MustCompile(`(?m)^#.*\./orderflow publish\b.*$`)

// publishCommandProblems: the compose file's name server is not on the
// machine that runs orderflow publish, which then needs -allow-remote.
func publishCommandProblems(file string) []string {
	text, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range publishCommand.FindAllString(string(text), -1) {
		if !strings.Contains(line, "-allow-remote") {
			out = append(out, fmt.Sprintf("%s shows %q without -allow-remote (the compose name server is not local)", filepath.Base(file), strings.TrimSpace(line)))
		}
	}
	return out
}

// redisPassword is the password the redis service requires
// (--requirepass), "" when none.
func redisPassword(p *types.Project) string {
	cmd := p.Services["redis"].Command
	for i, a := range cmd {
		if a == "--requirepass" && i+1 < len(cmd) {
			return cmd[i+1]
		}
	}
	return ""
}

// checkRedisURL: the bridge's REDIS_URL names the redis service on the
// default port and database, without TLS, with the password the redis
// service requires.
func checkRedisURL(p *types.Project, out *[]string, v string, def *url.URL) {
	u, err := url.Parse(v)
	if err != nil {
		*out = append(*out, fmt.Sprintf("service starter: REDIS_URL does not parse: %v", err))
		return
	}
	want := redisPassword(p)
	if want == "" {
		*out = append(*out, "service redis: no --requirepass (Redis without a password)")
	}
	if got, _ := u.User.Password(); got != want {
		*out = append(*out, "service starter: REDIS_URL's password is not the redis service's --requirepass")
	}
	if _, ok := p.Services[u.Hostname()]; !ok || u.Hostname() != "redis" || u.Scheme != def.Scheme || u.Port() != def.Port() ||
		u.Path != def.Path {
		*out = append(*out, fmt.Sprintf("service starter: REDIS_URL %q, want %s://redis:%s%s (the redis service, config's default port and database)",
			v, def.Scheme, def.Port(), def.Path))
	}
}

// checkTemporalDatabases: the databases and role the temporal service uses
// are the ones deploy/postgres/init.sql creates.
func checkTemporalDatabases(root string, out *[]string, e map[string]string) {
	sql, err := os.ReadFile(filepath.Join(root, "deploy", "postgres", "init.sql"))
	if err != nil {
		*out = append(*out, fmt.Sprintf("deploy/postgres/init.sql: %v", err))
		return
	}
	s := string(sql)
	for _, want := range []string{
		"CREATE ROLE " + e["POSTGRES_USER"] + " LOGIN PASSWORD '" + e["POSTGRES_PWD"] + "'",
		"CREATE DATABASE " + e["DBNAME"] + " ",
		"CREATE DATABASE " + e["VISIBILITY_DBNAME"] + " ",
	} {
		if !strings.Contains(s, want) {
			*out = append(*out, fmt.Sprintf("service temporal: deploy/postgres/init.sql lacks %q", want))
		}
	}
	if e["SKIP_DB_CREATE"] != "true" {
		*out = append(*out, "service temporal: SKIP_DB_CREATE should be true (init.sql creates the databases)")
	}
}

// checkBrokerConf: each broker's mounted configuration registers it with its
// name server under its own service name, listens on the published port and
// flushes every message to disk before acknowledging it; the replicated
// profile's brokers run in controller mode and acknowledge only what every
// replica in sync has, and its name server runs the controller.
func checkBrokerConf(root string, p *types.Project, out *[]string) {
	nsPort := portOf(config.Defaults().RocketMQNamesrv)
	want := map[string]map[string]string{
		"rocketmq-broker": {"brokerIP1": "rocketmq-broker", "namesrvAddr": "rocketmq-namesrv:" + nsPort,
			"listenPort": portBroker, "flushDiskType": "SYNC_FLUSH", "enableMixedMessageType": "true"},
		"rocketmq-ha-namesrv": {"enableControllerInNamesrv": "true", "listenPort": nsPort,
			"controllerDLegerPeers": "n0-rocketmq-ha-namesrv:9878", "enableElectUncleanMaster": "false"},
	}
	for _, b := range []string{"rocketmq-ha-broker-0", "rocketmq-ha-broker-1"} {
		want[b] = map[string]string{"brokerIP1": b, "namesrvAddr": "rocketmq-ha-namesrv:" + nsPort,
			"controllerAddr": "rocketmq-ha-namesrv:9878", "enableControllerMode": "true", "brokerName": "broker-a",
			"allAckInSyncStateSet": "true", "flushDiskType": "SYNC_FLUSH", "listenPort": portBroker}
	}
	for _, svc := range sortedKeys(want) {
		props, conf, err := mountedConf(root, p, svc)
		if err != nil {
			*out = append(*out, fmt.Sprintf("service %s: %v", svc, err))
			continue
		}
		for _, k := range sortedKeys(want[svc]) {
			if props[k] != want[svc][k] {
				*out = append(*out, fmt.Sprintf("service %s: %s = %q in %s, want %q", svc, k, props[k], filepath.Base(conf), want[svc][k]))
			}
		}
	}
}

// mountedConf reads the .conf file mounted into a RocketMQ service and
// passed to it with -c.
func mountedConf(root string, p *types.Project, svc string) (map[string]string, string, error) {
	var conf, target string
	for _, v := range p.Services[svc].Volumes {
		if v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Target, ".conf") {
			conf, target = v.Source, v.Target
		}
	}
	if conf == "" {
		return nil, "", fmt.Errorf("no .conf file mounted")
	}
	if cmd := strings.Join(p.Services[svc].Command, " "); !strings.Contains(cmd, "-c "+target) {
		return nil, conf, fmt.Errorf("command %q does not pass the mounted configuration %s with -c", cmd, target)
	}
	if rel, _ := filepath.Rel(root, conf); strings.HasPrefix(rel, "..") {
		return nil, conf, fmt.Errorf("configuration %s is outside the repository", conf)
	}
	f, err := os.Open(conf)
	if err != nil {
		return nil, conf, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return props, conf, sc.Err()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// documentedTracing finds, in the compose file's comments, the command
// that turns tracing on: OTEL_EXPORTER_OTLP_ENDPOINT=<url> docker compose
// --profile tracing ...
var documentedTracing = regexp.MustCompile(`OTEL_EXPORTER_OTLP_ENDPOINT=(\S+) docker compose --profile tracing`)

// otlpPorts are the OTLP ports of each transport.
var otlpPorts = map[string]string{tracing.ProtocolGRPC: "4317", tracing.ProtocolHTTP: "4318"}

// tracingProblems checks the "tracing" profile of the compose file: the
// worker and the bridge trace nothing by default (package tracing's rule);
// with the variable the file documents they export to its trace backend,
// a service of the profile only, on the OTLP port of their protocol,
// published like the UI's.
func tracingProblems(t *testing.T, root, file string) []string {
	t.Helper()
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	text, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	off, err := loadCompose(t, root, file)
	if err != nil {
		return []string{fmt.Sprintf("compose file does not load: %v", err)}
	}
	for _, svc := range []string{"worker", "starter"} {
		e := env(off, svc)
		if _, ok := e[tracing.EnvEndpoint]; !ok {
			bad("service %s: %s not set (the way to turn tracing on)", svc, tracing.EnvEndpoint)
		}
		s, err := tracing.FromEnv(lookup(e))
		switch {
		case err != nil:
			bad("service %s: tracing settings: %v", svc, err)
		case s.On:
			bad("service %s: tracing is on by default (%s)", svc, s.Why)
		}
	}
	m := documentedTracing.FindSubmatch(text)
	if m == nil {
		return append(out, "the compose file does not document how to turn tracing on (OTEL_EXPORTER_OTLP_ENDPOINT=... docker compose --profile tracing)")
	}
	endpoint := string(m[1])
	on, err := loadCompose(t, root, file, tracing.EnvEndpoint+"="+endpoint)
	if err != nil {
		return append(out, fmt.Sprintf("compose file does not load with %s=%s: %v", tracing.EnvEndpoint, endpoint, err))
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return append(out, fmt.Sprintf("documented %s=%s is not a URL", tracing.EnvEndpoint, endpoint))
	}
	backend, ok := on.Services[u.Hostname()]
	if !ok {
		return append(out, fmt.Sprintf("documented %s=%s: no service %s", tracing.EnvEndpoint, endpoint, u.Hostname()))
	}
	if !slices.Equal(backend.Profiles, []string{"tracing"}) {
		bad("service %s: profiles %q, want only the \"tracing\" profile (started only when asked for)", backend.Name, backend.Profiles)
	}
	published := func(port string) bool {
		for _, p := range backend.Ports {
			if p.Published == port && strconv.Itoa(int(p.Target)) == port {
				return true
			}
		}
		return false
	}
	for _, port := range []string{"4317", "4318", "16686"} {
		if !published(port) {
			bad("service %s: want port %s published to container port %s, have %v", backend.Name, port, port, backend.Ports)
		}
	}
	for _, svc := range []string{"worker", "starter"} {
		e := env(on, svc)
		s, err := tracing.FromEnv(lookup(e))
		switch {
		case err != nil:
			bad("service %s with %s=%s: %v", svc, tracing.EnvEndpoint, endpoint, err)
		case !s.On:
			bad("service %s: tracing stays off with %s=%s (%s)", svc, tracing.EnvEndpoint, endpoint, s.Why)
		case e[tracing.EnvEndpoint] != endpoint:
			bad("service %s: %s = %q, want the given %q", svc, tracing.EnvEndpoint, e[tracing.EnvEndpoint], endpoint)
		case u.Port() != otlpPorts[s.Protocol]:
			bad("service %s: exports over %s to %s, but OTLP over %s is port %s", svc, s.Protocol, endpoint, s.Protocol, otlpPorts[s.Protocol])
		}
	}
	return out
}

// lookup reads a service's environment as os.LookupEnv reads the process's.
func lookup(e map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := e[k]
		return v, ok
	}
}
