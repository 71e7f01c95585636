package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/orderflow/orderflow/internal/backlog"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestWorkerExportsBrokerLag runs the worker binary pointed at a fresh
// topic of 2 queues holding 25 messages that no consumer of the group has
// taken: its /metrics exports the broker-side backlog, one series per
// queue of the topic and of the retry topic, summing to 25 and matching
// the send receipts, and a read-error counter at 0.
func TestWorkerExportsBrokerLag(t *testing.T) {
	testenv.RequireTemporal(t)
	namesrv := testenv.RocketMQNamesrv(t)
	_, dsn := testenv.NewDatabase(t)
	topic, group := uniq.Name("wk-lag"), uniq.Name("wk-lag-g")
	testenv.CreateTopic(t, topic, 2)
	testenv.CreateTopic(t, backlog.RetryTopic(group), 1)
	const n = 25
	perQ := testenv.Publish(t, topic, n)

	p := startWorker(t, dsn, uniq.Name("wk-lag-tq"), "-rocketmq-namesrv", namesrv, "-topic", topic,
		"-consumer-group", group, "-broker-lag-interval", "1s")
	testenv.WaitFor(t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + p.addr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return err
		}
		if e := fams[backlog.ErrorsMetric]; e == nil || e.GetMetric()[0].GetCounter().GetValue() != 0 {
			return fmt.Errorf("%s: %v, want 0", backlog.ErrorsMetric, e)
		}
		lag := map[string]float64{}
		var sum float64
		for _, m := range fams[backlog.LagMetric].GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["group"] != group || l["broker"] == "" {
				return fmt.Errorf("series with labels %v", l)
			}
			lag[l["topic"]+"/"+l["queue"]] = m.GetGauge().GetValue()
			sum += m.GetGauge().GetValue()
		}
		want := map[string]float64{topic + "/0": float64(perQ[0]), topic + "/1": float64(perQ[1]), backlog.RetryTopic(group) + "/0": 0}
		if sum != n || fmt.Sprint(lag) != fmt.Sprint(want) {
			return fmt.Errorf("%s: %v (sum %v), want %v (sum %d)", backlog.LagMetric, lag, sum, want, n)
		}
		return nil
	})
	if _, _, err := p.Stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	if strings.Contains(p.Output(), "cannot read the broker-side backlog") {
		t.Errorf("the worker logged a failed read:\n%s", p.Tail(2000))
	}
}

// TestWorkerServesMetricsWhenTheBrokerLagCannotBeRead: a name server list
// the RocketMQ client refuses (it takes IP addresses only) does not stop
// the worker: it starts, is ready, and /metrics counts the failed reads
// and exports no lag series.
func TestWorkerServesMetricsWhenTheBrokerLagCannotBeRead(t *testing.T) {
	testenv.RequireTemporal(t)
	_, dsn := testenv.NewDatabase(t)
	p := startWorker(t, dsn, uniq.Name("wk-lag-bad"), "-rocketmq-namesrv", "localhost:1", "-broker-lag-interval", "200ms")
	testenv.WaitFor(t, 20*time.Second, func() error {
		if status, body := p.get("/readyz"); status != http.StatusOK {
			return fmt.Errorf("/readyz = %d %s", status, body)
		}
		status, body := p.get("/metrics")
		if status != http.StatusOK {
			return fmt.Errorf("/metrics = %d", status)
		}
		if strings.Contains(body, backlog.LagMetric+"{") {
			return fmt.Errorf("lag series exported:\n%s", body)
		}
		for _, line := range strings.Split(body, "\n") {
			var n float64
			if _, err := fmt.Sscanf(line, backlog.ErrorsMetric+" %g", &n); err == nil && n >= 2 {
				return nil
			}
		}
		return fmt.Errorf("%s not at 2 or more yet", backlog.ErrorsMetric)
	})
	if _, _, err := p.Stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	if n := strings.Count(p.Output(), "cannot read the broker-side backlog"); n != 1 {
		t.Errorf("the failed reads were logged %d times, want once:\n%s", n, p.Tail(3000))
	}
}
