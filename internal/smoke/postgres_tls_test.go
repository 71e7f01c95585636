package smoke

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/testenv"
)

// restartPostgres is the hint for a server that runs without TLS: make up
// writes the TLS settings when it starts PostgreSQL, so a server started by
// an older scripts/stack.sh needs a restart.
const restartPostgres = "run `make up` (a PostgreSQL started before scripts/stack.sh turned TLS on needs a restart: `scripts/stack.sh down postgres && make up`)"

// TestPostgresTLS checks that the local PostgreSQL takes TLS connections with
// the self-signed certificate scripts/stack.sh makes, verified against the
// root certificate it publishes, and still takes plain ones.
func TestPostgresTLS(t *testing.T) {
	testenv.SkipShort(t, "PostgreSQL")
	base, err := url.Parse(testenv.DatabaseURL())
	if err != nil || (base.Scheme != "postgres" && base.Scheme != "postgresql") {
		t.Fatalf("DATABASE_URL must be a postgres:// URL, got %q", config.Redact(testenv.DatabaseURL()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Plain first: a server that is down is a different failure from one
	// without TLS.
	plain := withSSL(base, "disable", "")
	ssl, err := backendSSL(ctx, plain)
	if err != nil {
		t.Fatalf("PostgreSQL (%s) is unreachable: %v; start the local stack with `make up`", redactURL(plain), err)
	}
	if ssl {
		t.Errorf("sslmode=disable: pg_stat_ssl.ssl = true, want false")
	}

	require := withSSL(base, "require", "")
	ssl, err = backendSSL(ctx, require)
	if err != nil {
		t.Fatalf("PostgreSQL (%s) does not take TLS connections: %v; %s", redactURL(require), err, restartPostgres)
	}
	if !ssl {
		t.Errorf("sslmode=require: pg_stat_ssl.ssl = false, want true")
	}

	root := postgresRootCert(t)
	if _, err := os.Stat(root); err != nil {
		// Another clone's stack may run the server: its data folder is
		// the parent of the postmaster's -D.
		root = runningPostgresRootCert(base.Port())
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("root certificate of the local PostgreSQL: %v; %s, or, when another clone's stack runs PostgreSQL, set ORDERFLOW_DATA to that clone's .data", err, restartPostgres)
	}
	verified := withSSL(base, "verify-full", root)
	ssl, err = backendSSL(ctx, verified)
	if err != nil {
		t.Fatalf("sslmode=verify-full with %s (%s): %v; the server's certificate must be the one scripts/stack.sh made (for 127.0.0.1 and localhost); %s",
			root, redactURL(verified), err, restartPostgres)
	}
	if !ssl {
		t.Errorf("sslmode=verify-full: pg_stat_ssl.ssl = false, want true")
	}
}

// postgresRootCert returns the root certificate scripts/stack.sh publishes:
// postgres-tls/root.crt in ORDERFLOW_DATA (default <repo>/.data; a relative
// ORDERFLOW_DATA is taken from the repository root, where make runs).
func postgresRootCert(t *testing.T) string {
	t.Helper()
	data := os.Getenv("ORDERFLOW_DATA")
	if data == "" {
		data = ".data"
	}
	if !filepath.IsAbs(data) {
		data = filepath.Join(repoRoot(t), data)
	}
	return filepath.Join(data, "postgres-tls", "root.crt")
}

// runningPostgresRootCert finds a local postmaster listening on port (its
// -D data directory and -p port, as scripts/stack.sh starts it) and returns
// the root certificate the stack script published beside its data
// directory, or "" when there is none.
func runningPostgresRootCert(port string) string {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "postgres" {
			continue
		}
		var dir string
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-D" {
				dir = args[i+1]
			}
		}
		if dir == "" {
			continue
		}
		conf, err := os.ReadFile(filepath.Join(dir, "orderflow.conf"))
		if err != nil || !strings.Contains(string(conf), "port = "+port+"\n") {
			continue
		}
		return filepath.Join(filepath.Dir(dir), "postgres-tls", "root.crt")
	}
	return ""
}

// withSSL returns base with its TLS parameters replaced by sslmode and, when
// not empty, sslrootcert.
func withSSL(base *url.URL, mode, rootCert string) string {
	u := *base
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "ssl") {
			q.Del(k)
		}
	}
	q.Set("sslmode", mode)
	if rootCert != "" {
		q.Set("sslrootcert", rootCert)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// backendSSL connects to dsn and reports whether the server sees the
// connection as TLS.
func backendSSL(ctx context.Context, dsn string) (bool, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		return false, err
	}
	return ssl, nil
}

func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "DATABASE_URL"
	}
	return u.Redacted()
}
