package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/wire"
)

// bomb is a zlib stream of n bytes: a distinct prefix, then zeros. Zeros
// compress about a thousand to one.
func bomb(t *testing.T, id string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zlib.NewWriterLevel(&b, zlib.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(id)); err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for written := len(id); written < n; written += len(zeros) {
		if _, err := w.Write(zeros[:min(len(zeros), n-written)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// peakRSS is the process's peak resident set size (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// Compressed bodies that inflate far past the contract's 64 KiB: the bridge
// must park them (raw, still compressed) without inflating them, keep
// running, and go on with the queue.
func TestBridgeParksCompressionBombs(t *testing.T) {
	const (
		bombs    = 12
		inflated = 100 << 20 // each inflates to 100 MiB
	)
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 1)
	bin := buildBridge(t)
	p := e.startBridgeProc(t, bin)
	before := peakRSS(t, p.Pid())

	pr, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(testenv.NamesrvList(e.namesrv))),
		producer.WithGroupName(uniq.Name("bomb-producer")),
		producer.WithRetry(2),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.Shutdown() })
	sent := map[string][]byte{} // keys -> compressed body
	for i := range bombs {
		z := bomb(t, fmt.Sprintf("bomb-%s-%d", e.prefix, i), inflated)
		sent[fmt.Sprintf("bomb-%d", i)] = z
		m := primitive.NewMessage(e.topic, []byte("placeholder"))
		m.Compress, m.CompressedBody = true, z
		m.WithKeys([]string{fmt.Sprintf("bomb-%d", i)})
		res, err := pr.SendSync(context.Background(), m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("publish bomb %d (%d bytes compressed): %v %v", i, len(z), res, err)
		}
	}
	// A valid event behind them: the queue goes on.
	ev := e.event(0, 1, fsm.Created)
	e.publish(t, ev)

	e.waitAccounted(t, []fsm.Key{ev.Key()}, bombs, 2*time.Minute)
	want := fmt.Sprintf("oversize: compressed body inflates past %d bytes", wire.MaxBodySize)
	rows, err := e.sqlDB.Query(`SELECT keys, reason, body FROM dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d deadRow
		if err := rows.Scan(&d.Keys, &d.Reason, &d.Body); err != nil {
			t.Fatal(err)
		}
		if d.Reason != want {
			t.Errorf("dead letter %s: reason %q, want %q", d.Keys, d.Reason, want)
		}
		if z, ok := sent[d.Keys]; !ok || !bytes.Equal(d.Body, z) {
			t.Errorf("dead letter %s: body of %d bytes, want the %d compressed bytes as sent", d.Keys, len(d.Body), len(z))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		t.Fatalf("bridge exited: %v", p.Err())
	default:
	}
	peak := peakRSS(t, p.Pid())
	t.Logf("%d bombs of about %d compressed bytes, each inflating to %d MiB: parked; bridge peak RSS %d MiB (%d MiB before)",
		bombs, len(sent["bomb-0"]), inflated>>20, peak>>20, before>>20)
	if peak > 256<<20 {
		t.Errorf("bridge peak RSS %d MiB: it inflated the bombs", peak>>20)
	}
}
