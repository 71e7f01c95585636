/*
Licensed to the Apache Software Foundation (ASF) under one or more
contributor license agreements.  See the NOTICE file distributed with
this work for additional information regarding copyright ownership.
The ASF licenses this file to You under the Apache License, Version 2.0
(the "License"); you may not use this file except in compliance with
the License.  You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// orderflow patch: this whole file. The admin API of v2.1.2 cannot read a
// consumer group's committed offsets, nor a queue's minimum and maximum
// offsets; the requests exist only inside the client (internal, remote), so
// they cannot be sent from outside the module. See ORDERFLOW.md, change 3.

package admin

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2/internal"
	"github.com/apache/rocketmq-client-go/v2/internal/remote"
	"github.com/apache/rocketmq-client-go/v2/internal/utils"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// permRead is the readable bit of a queue's permission (internal.permRead).
const permRead = 0x1 << 2

// offsetRequestTimeout bounds each request to a broker.
const offsetRequestTimeout = 3 * time.Second

// QueueOffsets are one message queue's offsets as its master broker reports
// them. (orderflow patch)
type QueueOffsets struct {
	Queue primitive.MessageQueue
	// BrokerAddr is the address of the master broker that answered.
	BrokerAddr string
	// Min is the offset of the first message still stored in the queue;
	// Max is the offset the next message stored will get (so Max-Min
	// messages are stored).
	Min, Max int64
	// Committed is the consumer group's committed offset for the queue:
	// the offset of the next message the group will consume. It is -1 when
	// the broker holds no offset of the group for the queue.
	Committed int64
}

// ConsumeOffsets resolves topic's route from the name servers and asks, for
// every readable queue, its master broker for the queue's minimum and
// maximum offsets and for the committed offset of the consumer group. It
// only reads. A topic the name servers do not know fails with an error
// wrapping errors.ErrTopicNotExist of package
// github.com/apache/rocketmq-client-go/v2/errors. Calls on one admin must not
// overlap when it has credentials (the signing interceptor is set per
// call, as GetAllSubscriptionGroup does). (orderflow patch)
func (a *admin) ConsumeOffsets(ctx context.Context, group, topic string) ([]QueueOffsets, error) {
	topic = utils.WrapNamespace(a.opts.Namespace, topic)
	group = utils.WrapNamespace(a.opts.Namespace, group)
	route, _, err := a.cli.GetNameSrv().UpdateTopicRouteInfo(topic)
	if err != nil {
		return nil, fmt.Errorf("route of topic %s: %w", topic, err)
	}
	if route == nil {
		return nil, fmt.Errorf("route of topic %s: no answer from the name servers", topic)
	}
	masters := make(map[string]string, len(route.BrokerDataList))
	for _, bd := range route.BrokerDataList {
		masters[bd.BrokerName] = bd.BrokerAddresses[internal.MasterId]
	}
	a.cli.RegisterACL()
	var out []QueueOffsets
	for _, qd := range route.QueueDataList {
		if qd.Perm&permRead != permRead {
			continue
		}
		addr := masters[qd.BrokerName]
		if addr == "" {
			return nil, fmt.Errorf("topic %s: broker %s has no master in the route", topic, qd.BrokerName)
		}
		for id := 0; id < qd.ReadQueueNums; id++ {
			q := QueueOffsets{Queue: primitive.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueId: id}, BrokerAddr: addr}
			if q.Min, err = a.queueOffset(ctx, addr, internal.ReqGetMinOffset, topic, id); err != nil {
				return nil, fmt.Errorf("min offset of %s queue %d on broker %s (%s): %w", topic, id, qd.BrokerName, addr, err)
			}
			if q.Max, err = a.queueOffset(ctx, addr, internal.ReqGetMaxOffset, topic, id); err != nil {
				return nil, fmt.Errorf("max offset of %s queue %d on broker %s (%s): %w", topic, id, qd.BrokerName, addr, err)
			}
			if q.Committed, err = a.committedOffset(ctx, addr, group, topic, id); err != nil {
				return nil, fmt.Errorf("offset of group %s on %s queue %d on broker %s (%s): %w", group, topic, id, qd.BrokerName, addr, err)
			}
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue.BrokerName != out[j].Queue.BrokerName {
			return out[i].Queue.BrokerName < out[j].Queue.BrokerName
		}
		return out[i].Queue.QueueId < out[j].Queue.QueueId
	})
	return out, nil
}

// queueOffset asks the broker for the minimum or maximum offset (code
// ReqGetMinOffset or ReqGetMaxOffset) of one queue. Both requests carry the
// same header fields, topic and queueId.
func (a *admin) queueOffset(ctx context.Context, addr string, code int16, topic string, queueID int) (int64, error) {
	cmd := remote.NewRemotingCommand(code, &internal.GetMaxOffsetRequestHeader{Topic: topic, QueueId: queueID}, nil)
	res, err := a.cli.InvokeSync(ctx, addr, cmd, offsetRequestTimeout)
	if err != nil {
		return -1, err
	}
	if res.Code != internal.ResSuccess {
		return -1, fmt.Errorf("broker answered code %d: %s", res.Code, res.Remark)
	}
	return strconv.ParseInt(res.ExtFields["offset"], 10, 64)
}

// committedOffset asks the broker for the group's committed offset of one
// queue; -1 when it has none. setZeroIfNotFound=false asks brokers 5.x to
// say so rather than answer 0 for a queue whose first message is still in
// memory; older brokers ignore the field and answer 0 only where the group
// would start at 0 anyway.
func (a *admin) committedOffset(ctx context.Context, addr, group, topic string, queueID int) (int64, error) {
	cmd := remote.NewRemotingCommand(internal.ReqQueryConsumerOffset,
		&internal.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueId: queueID}, nil)
	cmd.ExtFields["setZeroIfNotFound"] = "false"
	res, err := a.cli.InvokeSync(ctx, addr, cmd, offsetRequestTimeout)
	if err != nil {
		return -1, err
	}
	switch res.Code {
	case internal.ResSuccess:
		return strconv.ParseInt(res.ExtFields["offset"], 10, 64)
	case internal.ResQueryNotFound:
		return -1, nil
	default:
		return -1, fmt.Errorf("broker answered code %d: %s", res.Code, res.Remark)
	}
}
