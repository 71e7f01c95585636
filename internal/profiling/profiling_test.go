package profiling

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/procs"
)

// TestServeOff: an empty address opens no listening socket (and stop is
// safe to call).
func TestServeOff(t *testing.T) {
	before := listening(t)
	stop, err := Serve("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if after := listening(t); len(after) != len(before) {
		t.Fatalf("Serve(\"\") opened a listening socket: %d listening before, %d after", len(before), len(after))
	}
}

// listening returns the inodes of the TCP sockets this process holds that
// are in the LISTEN state, from /proc.
func listening(t *testing.T) map[string]bool {
	t.Helper()
	listen := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if f := strings.Fields(sc.Text()); len(f) > 9 && f[3] == "0A" {
				listen[f[9]] = true
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil {
			continue // closed since the listing
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok && listen[strings.TrimSuffix(inode, "]")] {
			mine[inode] = true
		}
	}
	return mine
}

func TestServeProfiles(t *testing.T) {
	addr, err := procs.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	stop, err := Serve(addr, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("status %d, body %.200s", resp.StatusCode, body)
	}
	if n := len(listening(t)); n != 1 {
		t.Fatalf("%d listening sockets while serving, want 1", n)
	}
}

func TestServeBadAddress(t *testing.T) {
	if _, err := Serve("256.0.0.1:bad", slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("Serve accepted an invalid address")
	}
}
