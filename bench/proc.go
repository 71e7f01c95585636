package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a worker or bridge process started by the benchmark.
type process struct {
	name string
	addr string // its metrics/health HTTP address
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// startProcess runs bin with args, its JSON logs going to logDir/name.log,
// and waits until its /readyz answers 200.
func startProcess(ctx context.Context, logDir, name, bin string, args []string) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	lf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"-metrics-addr", addr}, args...)...)
	cmd.Env = append(os.Environ(), "ORDERFLOW_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, addr: addr, cmd: cmd, done: make(chan error, 1), log: lf}
	go func() { p.done <- cmd.Wait() }()

	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-p.done:
			_ = lf.Close()
			return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", name, err, lf.Name())
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready within 90s; see %s", name, lf.Name())
		}
	}
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after 40s).
func (p *process) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.log.Close()
}
