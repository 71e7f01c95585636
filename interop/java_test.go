package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Java side: the programs' sources, the jars `make up` fetches into the
// cache (scripts/stack.sh), and how a program is compiled and run.

// javaDir holds the programs' sources, their pom (the gRPC client's jars)
// and the remoting client's logging configuration, relative to this package.
var javaDir = filepath.Join("java")

// brokerPom is the pom of the broker's jars, among which is the remoting
// client.
var brokerPom = filepath.Join("..", "deploy", "rocketmq", "pom.xml")

// javaClient is one Java client: the class path its program is compiled
// and run with, and the program.
type javaClient struct {
	name    string   // "remoting" or "grpc"
	main    string   // the program's class
	sources []string // the program's source files, relative to javaDir/src
	libs    string   // the folder of jars (the class path's "dir/*")
	extra   []string // folders on the class path before the jars
	classes string   // where javac put the classes
}

// shared are the sources both programs use; each is compiled with each
// client's class path.
var shared = []string{"Line.java", "Summary.java", "Args.java", "CheckBacks.java"}

const javaPkg = "io/github/orderflow/interop"

// cacheDir is the cache scripts/stack.sh fetches the jars into:
// ORDERFLOW_CACHE, or ~/.cache/orderflow as the Makefile has it.
func cacheDir(t *testing.T) string {
	if d := os.Getenv("ORDERFLOW_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatalf("home directory: %v", err)
	}
	return filepath.Join(home, ".cache", "orderflow")
}

// pomProperty reads property name of a pom, as scripts/stack.sh does.
func pomProperty(t *testing.T, pom, name string) string {
	b, err := os.ReadFile(pom)
	if err != nil {
		t.Fatalf("read %s: %v", pom, err)
	}
	m := regexp.MustCompile(`<` + regexp.QuoteMeta(name) + `>([^<]+)</`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no <%s>", pom, name)
	}
	return string(m[1])
}

// javaClients returns the two clients with the jars the stack fetched, or
// fails the test naming the command that fetches them.
func javaClients(t *testing.T) (remoting, grpc *javaClient) {
	t.Helper()
	cache := cacheDir(t)
	rmq := pomProperty(t, brokerPom, "rocketmq.version")
	cj := pomProperty(t, filepath.Join(javaDir, "pom.xml"), "rocketmq-client-java.version")
	res, err := filepath.Abs(filepath.Join(javaDir, "resources"))
	if err != nil {
		t.Fatal(err)
	}
	remoting = &javaClient{name: "remoting", main: "io.github.orderflow.interop.RemotingPublish",
		sources: append(append([]string(nil), shared...), "RemotingPublish.java"),
		libs:    filepath.Join(cache, "rocketmq-"+rmq, "lib"), extra: []string{res}}
	grpc = &javaClient{name: "grpc", main: "io.github.orderflow.interop.GrpcPublish",
		sources: append(append([]string(nil), shared...), "GrpcPublish.java"),
		libs:    filepath.Join(cache, "rocketmq-client-java-"+cj, "lib")}
	for _, c := range []*javaClient{remoting, grpc} {
		if _, err := os.Stat(c.libs); err != nil {
			t.Fatalf("the %s client's jars are missing (%v); `make up` (scripts/stack.sh up) fetches them into %s", c.name, err, cache)
		}
	}
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install a Java 17 JDK (`make deps`, or apt-get install -y openjdk-17-jdk-headless)", tool)
		}
	}
	return remoting, grpc
}

func (c *javaClient) classPath() string {
	parts := []string{c.classes}
	parts = append(parts, c.extra...)
	return strings.Join(append(parts, filepath.Join(c.libs, "*")), string(os.PathListSeparator))
}

// compile compiles the client's program into a folder of dir.
func (c *javaClient) compile(ctx context.Context, dir string) error {
	c.classes = filepath.Join(dir, c.name+"-classes")
	args := []string{"-J-XX:TieredStopAtLevel=1", "-Xlint:all", "-Werror", "-encoding", "UTF-8", "-d", c.classes,
		"-cp", filepath.Join(c.libs, "*")}
	for _, s := range c.sources {
		args = append(args, filepath.Join(javaDir, "src", javaPkg, s))
	}
	out, err := exec.CommandContext(ctx, "javac", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("javac (the %s program): %w\n%s", c.name, err, out)
	}
	return nil
}

// summary is what a program prints on its last line of standard output.
type summary struct {
	Client      string   `json:"client"`
	Mode        string   `json:"mode"`
	Lines       int      `json:"lines"`
	Sent        int      `json:"sent"`
	Batches     int      `json:"batches"`
	Committed   int      `json:"committed"`
	Unknown     int      `json:"unknown"`
	RolledBack  int      `json:"rolled_back"`
	CheckedBack int      `json:"checked_back"`
	Retries     int      `json:"retries"`
	MessageIDs  []string `json:"message_ids"`
}

// publishError is a program that failed: its exit and what it printed on
// standard error.
type publishError struct {
	err    error
	stderr string
}

func (e *publishError) Error() string {
	return fmt.Sprintf("%v; its standard error ends:\n%s", e.err, e.stderr)
}

func (e *publishError) Unwrap() error { return e.err }

// publish runs the client's program with args, the lines written to a file
// in dir, and returns its summary.
func (c *javaClient) publish(ctx context.Context, dir string, lines []line, args ...string) (*summary, error) {
	in, err := os.CreateTemp(dir, c.name+"-*.jsonl")
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(in)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			in.Close()
			return nil, fmt.Errorf("write lines: %w", err)
		}
	}
	if err := in.Close(); err != nil {
		return nil, fmt.Errorf("write lines: %w", err)
	}
	home, err := os.MkdirTemp(dir, c.name+"-home-")
	if err != nil {
		return nil, err
	}
	jargs := []string{
		// The clients write their own log files under user.home.
		"-Duser.home=" + home,
		"-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", c.classPath(), c.main,
	}
	jargs = append(jargs, args...)
	jargs = append(jargs, "--in", in.Name())
	cmd := exec.CommandContext(ctx, "java", jargs...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &publishError{err: fmt.Errorf("java %s %s: %w", c.main, strings.Join(args, " "), err), stderr: tail(stderr.String(), 4000)}
	}
	out := strings.TrimSpace(stdout.String())
	last := out[strings.LastIndexByte(out, '\n')+1:]
	var s summary
	if err := json.Unmarshal([]byte(last), &s); err != nil {
		return nil, fmt.Errorf("java %s: no summary on its last line of output (%w): %q", c.main, err, tail(out, 2000))
	}
	return &s, nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// isPublishError reports whether err is a program's failure (not the
// test's own).
func isPublishError(err error) (*publishError, bool) {
	var pe *publishError
	ok := errors.As(err, &pe)
	return pe, ok
}
