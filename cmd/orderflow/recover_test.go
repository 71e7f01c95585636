package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// Bad command lines are refused with exit status 2, before any service is
// asked.
func TestRecoverAndRewindUsage(t *testing.T) {
	for _, args := range [][]string{
		{"recover", "-since", "yesterday"},
		{"recover", "-since", "1h", "-yes", "-dry-run"},
		{"recover", "-since", "1h", "-margin", "-1m"},
		{"recover", "-since", "1h", "extra"},
		{"rewind"},
		{"rewind", "-to", "soon"},
		{"rewind", "-to", "1h", "-yes", "-dry-run"},
	} {
		if code, _, errOut := runCmd(args...); code != 2 {
			t.Errorf("orderflow %s: exit %d, want 2\n%s", strings.Join(args, " "), code, errOut)
		}
	}
}

// A rewind to a time before the broker's oldest message is refused when
// the broker deleted older messages (a queue's minimum offset above 0),
// and allowed on a queue that never lost any.
func TestCheckRetention(t *testing.T) {
	to := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	later := to.Add(time.Hour)
	plan := func(min int64, oldest time.Time) mq.RewindPlan {
		return mq.RewindPlan{To: to, Queues: []mq.QueueRewind{{Broker: "b", QueueID: 3, Min: min, EarliestStoreTime: oldest}}}
	}
	if err := checkRetention(plan(120, later)); err == nil || !strings.Contains(err.Error(), "no longer holds") {
		t.Errorf("messages deleted after the rewind's time: %v", err)
	}
	for _, p := range []mq.RewindPlan{plan(0, later), plan(120, to.Add(-time.Minute)), plan(120, time.Time{})} {
		if err := checkRetention(p); err != nil {
			t.Errorf("min %d oldest %s: %v", p.Queues[0].Min, p.Queues[0].EarliestStoreTime, err)
		}
	}
}

// While a consumer of the group runs, recover -yes refuses and changes
// nothing: the duplicate filter's keys stay and the offsets do not move.
// Its dry run says what it would do, naming the connected client.
func TestRecoverRefusesWhileABridgeRuns(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	testenv.RequireTemporal(t)
	redisURL := testenv.RedisURL(t)
	topic, group := uniq.Name("recover"), uniq.Name("recover-g")
	testenv.CreateTopic(t, topic, 2)
	testenv.Publish(t, topic, 10)
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, Goroutines: 2},
		func(context.Context, *primitive.MessageExt) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	}()
	// A key of the filter (the default namespace's), short-lived.
	r, err := dedup.OpenRedis(redisURL, dedup.RedisOptions{KeyPrefix: dedup.KeyPrefix(testenv.TemporalNamespace()), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := fsm.Key{OrderID: uniq.Name("recover"), Version: 1}
	if err := r.Remember(context.Background(), k, "h"); err != nil {
		t.Fatal(err)
	}
	args := []string{"recover", "-since", "10m", "-rocketmq-namesrv", namesrv, "-topic", topic, "-consumer-group", group,
		"-redis-url", redisURL, "-task-queue", uniq.Name("recover-tq")}
	// The group connects within a few seconds of the consumer's start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := runCmd(args...)
		if code != 0 {
			t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
		}
		if strings.Contains(out, "clients of the group are connected") {
			if !strings.Contains(out, "redis: would delete") || !strings.Contains(out, "0 running order workflows") ||
				!strings.Contains(out, "dry run: nothing changed") {
				t.Errorf("dry run:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dry run never saw the running consumer:\n%s", out)
		}
		time.Sleep(time.Second)
	}
	code, _, errOut := runCmd(append(args, "-yes")...)
	if code != 1 || !strings.Contains(errOut, "stop the bridges first") {
		t.Errorf("recover -yes with a consumer running: exit %d\n%s", code, errOut)
	}
	if _, found, err := r.Get(context.Background(), k); err != nil || !found {
		t.Errorf("the refused recover deleted the filter's key: found %v, %v", found, err)
	}
}

// A queue the database records no recovery point for (here: none has
// any) is refused without -since, naming the queues and changing nothing;
// with -since its rewind comes from the time, and the report says so.
func TestRecoverNeedsSinceForQueuesWithoutAPoint(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	testenv.RequireTemporal(t)
	_, dsn := testenv.NewDatabase(t)
	topic, group := uniq.Name("recover-np"), uniq.Name("recover-np-g")
	testenv.CreateTopic(t, topic, 2)
	testenv.Publish(t, topic, 4)
	args := []string{"recover", "-database-url", dsn, "-rocketmq-namesrv", namesrv, "-topic", topic, "-consumer-group", group,
		"-task-queue", uniq.Name("recover-np-tq")}
	code, out, errOut := runCmd(args...)
	if code != 2 || !strings.Contains(errOut, "no recovery point for 2 queues") || !strings.Contains(errOut, topic+" queue 0 of broker") {
		t.Errorf("recover with no points and no -since: exit %d, want 2 naming the two queues\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(append(args, "-since", "10m")...)
	if code != 0 || !strings.Contains(out, "2 queues have no recovery point: rewound to") || !strings.Contains(out, "dry run: nothing changed") {
		t.Errorf("recover -since 10m: exit %d\n%s%s", code, out, errOut)
	}
}
