package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PgBouncer is a PgBouncer process in transaction pooling mode in front of
// the stack's PostgreSQL, as production teams run one: every transaction
// may get another server connection, and named prepared statements do not
// carry over (PgBouncer 1.18, Debian's).
type PgBouncer struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string
	// ServerConns bounds its server connections per database and user.
	ServerConns int
}

// StartPgBouncer starts PgBouncer (installed by `make deps`; a test fails
// naming it when it is missing) on a free port in front of the stack's
// PostgreSQL, with pool_mode=transaction and serverConns server
// connections per database and user, stopped when the test ends.
func StartPgBouncer(t testing.TB, serverConns int) *PgBouncer {
	t.Helper()
	SkipShort(t, "PgBouncer")
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatalf("testenv: pgbouncer is not installed: run `make deps` (Debian's pgbouncer package)")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	direct, err := url.Parse(DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := direct.User.Password()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "orderflow-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// PgBouncer refuses to run as root: as root, it switches to the user
	// PostgreSQL runs as, who must read its files.
	var args []string
	owner := func(string) {}
	if os.Geteuid() == 0 {
		if u, err := user.Lookup("postgres"); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			args = append(args, "-u", u.Username)
			owner = func(p string) { _ = os.Chown(p, uid, gid) }
		}
	}
	owner(dir)
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
server_tls_sslmode = prefer
logfile = %s
pidfile = %s
`, direct.Hostname(), direct.Port(), port, filepath.Join(dir, "userlist.txt"), serverConns,
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	userlist := fmt.Sprintf("%q %q\n", direct.User.Username(), pw)
	for name, body := range map[string]string{"pgbouncer.ini": conf, "userlist.txt": userlist} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		owner(filepath.Join(dir, name))
	}
	cmd := exec.Command(bin, append(args, filepath.Join(dir, "pgbouncer.ini"))...)
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start pgbouncer: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = out.Close()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			so, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
			t.Fatalf("testenv: pgbouncer exited at start:\n%s%s", so, log)
		case <-ctx.Done():
			t.Fatalf("testenv: pgbouncer does not listen on %s: %v", addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return &PgBouncer{Addr: addr, ServerConns: serverConns}
}

// URL is dsn, a URL of the stack's PostgreSQL, through the pooler: the URL a
// user writes, with nothing added.
func (p *PgBouncer) URL(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr
	return u.String()
}
