package mq

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
)

// CreateTopic creates topic name with the given number of read and write
// queues on the broker at brokerAddr, then waits until the name servers
// route every queue, so that a producer can send to it at once. It retries
// until ctx is done; creating a topic that exists already is harmless. The
// connections use TLS with tlsConf when it is not nil.
func CreateTopic(ctx context.Context, namesrv []string, brokerAddr, name string, queues int, tlsConf *tls.Config) error {
	if queues < 1 {
		return fmt.Errorf("create topic %s: queues must be at least 1, got %d", name, queues)
	}
	created := false
	var lastErr error
	for {
		// A fresh admin client per attempt: the client caches topic routes.
		err := func() error {
			a, err := admin.NewAdmin(admin.WithResolver(resolver(namesrv)), admin.WithTLS(tlsConf))
			if err != nil {
				return fmt.Errorf("RocketMQ admin client: %w", err)
			}
			defer a.Close()
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if !created {
				if err := a.CreateTopic(actx, admin.WithTopicCreate(name), admin.WithBrokerAddrCreate(brokerAddr),
					admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues)); err != nil {
					return fmt.Errorf("create topic %s on broker %s: %w", name, brokerAddr, err)
				}
				created = true
			}
			mqs, err := a.FetchPublishMessageQueues(actx, name)
			if err != nil {
				return fmt.Errorf("route of topic %s: %w", name, err)
			}
			if len(mqs) != queues {
				return fmt.Errorf("topic %s routes %d of %d queues", name, len(mqs), queues)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not routable: %w (last error: %w)", name, ctx.Err(), lastErr)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
