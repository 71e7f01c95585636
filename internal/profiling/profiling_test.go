package profiling

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/procs"
)

func TestServeOff(t *testing.T) {
	stop, err := Serve("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop()
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
}

func TestServeBadAddress(t *testing.T) {
	if _, err := Serve("256.0.0.1:bad", slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("Serve accepted an invalid address")
	}
}
