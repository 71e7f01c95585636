package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An expected-state file that is missing, empty, malformed or without a
// prefix is bad usage (exit 2) of every command that reads one, named in
// the message, before anything is connected to.
func TestBadExpectedStateFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := []struct{ path, says string }{
		{filepath.Join(dir, "missing.json"), "no such file"},
		{write("empty.json", ""), "unexpected end of JSON input"},
		{write("malformed.json", `{"prefix": "run-1", "orders": [`), "unexpected end of JSON input"},
		{write("not-an-object.json", `["run-1"]`), "cannot unmarshal array"},
		{write("no-prefix.json", `{"orders": [{"order_id": "o-1"}]}`), "has no prefix or no orders"},
		{write("no-orders.json", `{"prefix": "run-1", "orders": []}`), "has no prefix or no orders"},
	}
	// Nothing answers at these addresses: a command that got past the file
	// would fail otherwise (exit 1).
	db := []string{"-database-url", "postgres://nobody:planted-pw@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}
	for _, f := range files {
		for _, cmd := range [][]string{
			append([]string{"check", "-expected", f.path, "-wait", "1s"}, db...),
			append([]string{"gaps", "-expected", f.path}, db...),
			{"publish", "-late", f.path, "-rocketmq-namesrv", "127.0.0.1:1"},
		} {
			code, out, errOut := runCmd(cmd...)
			if code != 2 || !strings.Contains(errOut, f.path) || !strings.Contains(errOut, f.says) || strings.Contains(out+errOut, "planted-pw") {
				t.Errorf("orderflow %s with %s: exit %d, want 2 naming the file and %q\n%s%s", cmd[0], filepath.Base(f.path), code, f.says, out, errOut)
			}
		}
	}
}
