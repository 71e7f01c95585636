package internal

import (
	"context"
	"sync"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/internal/remote"
)

// routeServer answers every request with a topic route of broker b1.
type routeServer struct{ remote.RemotingClient }

func (routeServer) InvokeSync(context.Context, string, *remote.RemotingCommand) (*remote.RemotingCommand, error) {
	return &remote.RemotingCommand{Code: ResSuccess, Body: []byte(`{"queueDatas":[{"brokerName":"b1","readQueueNums":2,"writeQueueNums":2,"perm":6}],` +
		`"brokerDatas":[{"brokerName":"b1","cluster":"c1","brokerAddrs":{"0":"127.0.0.1:10911"}}]}`)}, nil
}

// addressCheckingProducer notes, whenever it is given a topic's route,
// whether the name servers already resolve the route's broker: a sender
// that finds the route may look its broker up at once.
type addressCheckingProducer struct {
	s        *namesrvs
	resolved []string
}

func (p *addressCheckingProducer) PublishTopicList() []string { return nil }
func (p *addressCheckingProducer) UpdateTopicPublishInfo(string, *TopicPublishInfo) {
	p.resolved = append(p.resolved, p.s.FindBrokerAddrByName("b1"))
}
func (p *addressCheckingProducer) IsPublishTopicNeedUpdate(string) bool { return true }
func (p *addressCheckingProducer) IsUnitMode() bool                     { return false }

// TestRouteBrokersKnownBeforeProducersSeeTheRoute: a route reaches the
// producers only once its brokers' addresses are known (ORDERFLOW.md,
// change 7); before, a concurrent first send could find the route and no
// address ("topic=... route info not found").
func TestRouteBrokersKnownBeforeProducersSeeTheRoute(t *testing.T) {
	s := &namesrvs{srvs: []string{"127.0.0.1:9876"}, lock: new(sync.Mutex), nameSrvClient: routeServer{},
		brokerVersionMap: map[string]map[string]int32{}, brokerLock: new(sync.RWMutex)}
	c := &rmqClient{option: ClientOptions{Namesrv: s}}
	s.bundleClient = c
	p := &addressCheckingProducer{s: s}
	c.producerMap.Store("g1", p)
	if _, _, err := s.UpdateTopicRouteInfo("t1"); err != nil {
		t.Fatal(err)
	}
	if len(p.resolved) != 1 || p.resolved[0] != "127.0.0.1:10911" {
		t.Errorf("the broker's address when the producer got the route: %q, want 127.0.0.1:10911", p.resolved)
	}
}
