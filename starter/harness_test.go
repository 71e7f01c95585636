package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/bridge"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/workflows"
)

// testParams keep test workflows short-lived.
var testParams = workflows.Params{GracePeriod: 2 * time.Second, IdleTimeout: time.Minute}

// env is one test's isolated world: a fresh database, topic, task queue and
// consumer group on the real services, a producer, and a worker.
type env struct {
	db        *gorm.DB
	sqlDB     *sql.DB
	dsn       string
	tc        client.Client
	namesrv   string
	topic     string
	group     string
	taskQueue string
	producer  *mq.Producer
	prefix    string
}

func newEnv(t *testing.T, queues int) *env {
	t.Helper()
	db, dsn := testenv.NewDatabase(t)
	return newEnvOn(t, queues, db, dsn)
}

// newEnvOn is newEnv on a database of the test's: db to read it, dsn for
// the processes the test starts.
func newEnvOn(t *testing.T, queues int, db *gorm.DB, dsn string) *env {
	t.Helper()
	e := &env{tc: testenv.RequireTemporal(t), namesrv: testenv.RocketMQNamesrv(t), db: db, dsn: dsn}
	var err error
	if e.sqlDB, err = e.db.DB(); err != nil {
		t.Fatal(err)
	}
	e.topic = uniq.Name("bridge")
	e.group = uniq.Name("bridge-g")
	e.taskQueue = uniq.Name("bridge-tq")
	e.prefix = uniq.Name("o")
	testenv.CreateTopic(t, e.topic, queues)
	// Made up front so that redeliveries are routed at once (the client
	// learns a retry topic the broker creates later only on its next 30s
	// route update).
	testenv.CreateTopic(t, "%RETRY%"+e.group, 1)
	if e.producer, err = mq.NewProducer(e.namesrv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.producer.Close() })
	return e
}

// startWorker runs OrderWorkflow and the activities on the test database.
func (e *env) startWorker(t *testing.T) {
	t.Helper()
	w := worker.New(e.tc, e.taskQueue, worker.Options{})
	workflows.Register(w)
	w.RegisterActivity(&activities.Activities{Store: store.New(e.db), Topic: e.topic})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
}

// config is a bridge configuration for the test's topic, group and queue.
func (e *env) config() bridgeConfig {
	c := config.Defaults()
	c.TemporalAddress = testenv.TemporalAddress()
	c.TemporalNamespace = testenv.TemporalNamespace()
	c.TaskQueue = e.taskQueue
	c.DatabaseURL = e.dsn
	c.RocketMQNamesrv = e.namesrv
	c.Topic = e.topic
	c.ConsumerGroup = e.group
	return bridgeConfig{
		Config:             c,
		MetricsAddr:        "127.0.0.1:0",
		Concurrency:        4,
		BatchSize:          1,
		GracePeriod:        10 * time.Second,
		RetryFor:           2 * time.Second,
		AttemptTimeout:     time.Second,
		MaxRetryDelayLevel: 1,
		UndeliverableAfter: time.Hour,
		Workflow:           testParams,
	}
}

// event returns a valid event of order n at version v with status s.
func (e *env) event(n int, v int64, s fsm.Status) fsm.Event {
	id := fmt.Sprintf("%s-%d", e.prefix, n)
	return fsm.Event{EventID: fmt.Sprintf("%s@%d", id, v), OrderID: id, UserID: int64(n + 1), Status: s, Version: v,
		AmountCents: 1999, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
}

func (e *env) publish(t *testing.T, ev fsm.Event) {
	t.Helper()
	if _, err := e.producer.PublishEvent(context.Background(), e.topic, ev); err != nil {
		t.Fatalf("publish %s: %v", ev.Key(), err)
	}
}

func (e *env) publishRaw(t *testing.T, body []byte, keys, tag string) {
	t.Helper()
	if _, err := e.producer.PublishRaw(context.Background(), e.topic, body, keys, tag, keys); err != nil {
		t.Fatalf("publish raw: %v", err)
	}
}

// terminate ends the orders' workflows when the test ends, so that none is
// left on a task queue nobody polls.
func (e *env) terminate(t *testing.T, orders int) {
	t.Cleanup(func() {
		for n := 0; n < orders; n++ {
			_ = e.tc.TerminateWorkflow(context.Background(), api.WorkflowID(fmt.Sprintf("%s-%d", e.prefix, n)), "", "test finished")
		}
	})
}

// recordedKeys returns the business keys in order_events.
func (e *env) recordedKeys(t *testing.T) map[fsm.Key]bool {
	t.Helper()
	rows, err := e.sqlDB.Query(`SELECT order_id, version FROM order_events`)
	if err != nil {
		t.Fatalf("query order_events: %v", err)
	}
	defer rows.Close()
	keys := map[fsm.Key]bool{}
	for rows.Next() {
		var k fsm.Key
		if err := rows.Scan(&k.OrderID, &k.Version); err != nil {
			t.Fatal(err)
		}
		keys[k] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

type deadRow struct {
	Topic, MessageID, Keys, Tags, Reason string
	Body                                 []byte
	TimesSeen                            int
}

// deadLetters returns dead_letters by body; a body stored compressed (zlib,
// as the producer sent it) is also found under its inflated text.
func (e *env) deadLetters(t *testing.T) map[string]deadRow {
	t.Helper()
	rows, err := e.sqlDB.Query(`SELECT topic, message_id, keys, tags, reason, body, times_seen FROM dead_letters`)
	if err != nil {
		t.Fatalf("query dead_letters: %v", err)
	}
	defer rows.Close()
	out := map[string]deadRow{}
	for rows.Next() {
		var r deadRow
		if err := rows.Scan(&r.Topic, &r.MessageID, &r.Keys, &r.Tags, &r.Reason, &r.Body, &r.TimesSeen); err != nil {
			t.Fatal(err)
		}
		out[string(r.Body)] = r
		if zr, err := zlib.NewReader(bytes.NewReader(r.Body)); err == nil {
			if b, err := io.ReadAll(io.LimitReader(zr, 1<<20)); err == nil && len(b) < 1<<20 {
				out[string(b)] = r
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitAccounted waits until every key in want is in order_events and the
// number of dead letters is deadWant.
func (e *env) waitAccounted(t *testing.T, want []fsm.Key, deadWant int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := e.recordedKeys(t)
		var missing []fsm.Key
		for _, k := range want {
			if !got[k] {
				missing = append(missing, k)
			}
		}
		var dead int
		if err := e.sqlDB.QueryRow(`SELECT count(*) FROM dead_letters`).Scan(&dead); err != nil {
			t.Fatalf("count dead_letters: %v", err)
		}
		if len(missing) == 0 && dead == deadWant {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d events missing from order_events (e.g. %v); %d dead letters, want %d",
				timeout, len(missing), len(want), missing[:min(len(missing), 5)], dead, deadWant)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startBridge runs a bridge in-process with the given delivery and parking.
func startBridge(t *testing.T, cfg bridgeConfig, deliver bridge.DeliverFunc, park bridge.ParkFunc, checks ...obs.Check) *Bridge {
	t.Helper()
	log := obs.NewLogger(testWriter(t), slog.LevelWarn, "bridge")
	b, err := newBridge(cfg, bridgeDeps{Log: log, Registry: prometheus.NewRegistry(), Deliver: deliver, Park: park, Checks: checks})
	if err != nil {
		t.Fatalf("newBridge: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("bridge Start: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return b
}

// testWriter writes log lines to the test log (or stderr with -v off, as
// t.Log would drop them after the test).
func testWriter(t *testing.T) io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

// metric reads one sample from the bridge's /metrics; -1 when absent.
func metric(t *testing.T, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("metric %s: %v", series, err)
	}
	return v
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// pgHostPort is the host:port of a postgres:// URL.
func pgHostPort(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("database URL %q: %v", dsn, err)
	}
	if u.Port() == "" {
		return u.Host + ":5432"
	}
	return u.Host
}

// openDB opens a gorm connection that the test closes at its end.
func openDB(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: gormlogger.Discard, DisableAutomaticPing: true})
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	return db
}
