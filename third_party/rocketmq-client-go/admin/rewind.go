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

// orderflow patch: this whole file. The admin API of v2.1.2 cannot find a
// queue's offset by time, read how far back a queue still holds messages,
// tell whether a consumer group is online, nor set a group's committed
// offset; the requests exist only inside the client (internal, remote), or
// not at all, so they cannot be sent from outside the module. See
// ORDERFLOW.md, change 5.

package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2/internal"
	"github.com/apache/rocketmq-client-go/v2/internal/remote"
	"github.com/apache/rocketmq-client-go/v2/internal/utils"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Request and response codes of rocketmq-remoting's RequestCode and
// ResponseCode that internal/request.go and internal/response.go lack.
const (
	reqGetEarliestMsgStoreTime   = int16(32)
	reqGetConsumerConnectionList = int16(203)
	resConsumerNotOnline         = int16(206)
)

// QueueTimeOffset is what one message queue's master broker answers about a
// point in time. (orderflow patch)
type QueueTimeOffset struct {
	Queue primitive.MessageQueue
	// BrokerAddr is the address of the master broker that answered.
	BrokerAddr string
	// Min and Max are the queue's minimum and maximum offsets, as in
	// QueueOffsets.
	Min, Max int64
	// Offset is the offset of the first message the queue stores at or
	// after the time asked for: Max when every stored message is older, Min
	// when none is (the broker keeps the answer within [Min, Max]).
	Offset int64
	// EarliestStoreTime is the store time of the oldest message the queue
	// still holds; the zero time when the queue holds none.
	EarliestStoreTime time.Time
}

// brokerQueue is a readable queue of a topic and its master's address.
type brokerQueue struct {
	queue primitive.MessageQueue
	addr  string
}

// readableQueues resolves topic's route from the name servers and returns
// its readable queues with their master brokers' addresses, ordered by
// broker and queue, and the addresses of the route's masters. topic is
// already wrapped in the namespace.
func (a *admin) readableQueues(topic string) ([]brokerQueue, []string, error) {
	route, _, err := a.cli.GetNameSrv().UpdateTopicRouteInfo(topic)
	if err != nil {
		return nil, nil, fmt.Errorf("route of topic %s: %w", topic, err)
	}
	if route == nil {
		return nil, nil, fmt.Errorf("route of topic %s: no answer from the name servers", topic)
	}
	masters := make(map[string]string, len(route.BrokerDataList))
	var addrs []string
	for _, bd := range route.BrokerDataList {
		addr := bd.BrokerAddresses[internal.MasterId]
		masters[bd.BrokerName] = addr
		if addr != "" {
			addrs = append(addrs, addr)
		}
	}
	sort.Strings(addrs)
	var out []brokerQueue
	for _, qd := range route.QueueDataList {
		if qd.Perm&permRead != permRead {
			continue
		}
		addr := masters[qd.BrokerName]
		if addr == "" {
			return nil, nil, fmt.Errorf("topic %s: broker %s has no master in the route", topic, qd.BrokerName)
		}
		for id := 0; id < qd.ReadQueueNums; id++ {
			out = append(out, brokerQueue{queue: primitive.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueId: id}, addr: addr})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].queue.BrokerName != out[j].queue.BrokerName {
			return out[i].queue.BrokerName < out[j].queue.BrokerName
		}
		return out[i].queue.QueueId < out[j].queue.QueueId
	})
	return out, addrs, nil
}

// SearchOffsets resolves topic's route from the name servers and asks, for
// every readable queue, its master broker for the offset of the first
// message stored at or after ts (SEARCH_OFFSET_BY_TIMESTAMP, 29, with the
// broker's default boundary, the lower one), for the store time of the
// oldest message the queue still holds (GET_EARLIEST_MSG_STORETIME, 32) and
// for the queue's minimum and maximum offsets. The result is ordered by
// broker and queue. It only reads. A topic the name servers do not know
// fails with an error wrapping errors.ErrTopicNotExist of package
// github.com/apache/rocketmq-client-go/v2/errors. Calls on one admin must
// not overlap when it has credentials (see ConsumeOffsets). (orderflow patch)
func (a *admin) SearchOffsets(ctx context.Context, topic string, ts time.Time) ([]QueueTimeOffset, error) {
	topic = utils.WrapNamespace(a.opts.Namespace, topic)
	queues, _, err := a.readableQueues(topic)
	if err != nil {
		return nil, err
	}
	a.cli.RegisterACL()
	out := make([]QueueTimeOffset, 0, len(queues))
	for _, bq := range queues {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q := QueueTimeOffset{Queue: bq.queue, BrokerAddr: bq.addr}
		id, name, addr := bq.queue.QueueId, bq.queue.BrokerName, bq.addr
		if q.Min, err = a.queueOffset(ctx, addr, internal.ReqGetMinOffset, topic, id); err != nil {
			return nil, fmt.Errorf("min offset of %s queue %d on broker %s (%s): %w", topic, id, name, addr, err)
		}
		if q.Max, err = a.queueOffset(ctx, addr, internal.ReqGetMaxOffset, topic, id); err != nil {
			return nil, fmt.Errorf("max offset of %s queue %d on broker %s (%s): %w", topic, id, name, addr, err)
		}
		if q.Offset, err = a.searchOffset(ctx, addr, topic, id, ts); err != nil {
			return nil, fmt.Errorf("offset at %s of %s queue %d on broker %s (%s): %w", ts.Format(time.RFC3339Nano), topic, id, name, addr, err)
		}
		if q.EarliestStoreTime, err = a.earliestStoreTime(ctx, addr, topic, id); err != nil {
			return nil, fmt.Errorf("earliest store time of %s queue %d on broker %s (%s): %w", topic, id, name, addr, err)
		}
		out = append(out, q)
	}
	return out, nil
}

// searchOffset asks the broker for the offset of the first message of one
// queue stored at or after ts, in milliseconds as the broker stores times.
func (a *admin) searchOffset(ctx context.Context, addr, topic string, queueID int, ts time.Time) (int64, error) {
	cmd := remote.NewRemotingCommand(internal.ReqSearchOffsetByTimestamp,
		&internal.SearchOffsetRequestHeader{Topic: topic, QueueId: queueID, Timestamp: ts.UnixMilli()}, nil)
	res, err := a.cli.InvokeSync(ctx, addr, cmd, offsetRequestTimeout)
	if err != nil {
		return -1, err
	}
	if res.Code != internal.ResSuccess {
		return -1, fmt.Errorf("broker answered code %d: %s", res.Code, res.Remark)
	}
	return strconv.ParseInt(res.ExtFields["offset"], 10, 64)
}

// getEarliestMsgStoreTimeRequestHeader is the header of
// GET_EARLIEST_MSG_STORETIME.
type getEarliestMsgStoreTimeRequestHeader struct {
	Topic   string
	QueueId int
}

// Encode implements remote.CustomHeader.
func (h *getEarliestMsgStoreTimeRequestHeader) Encode() map[string]string {
	return map[string]string{"topic": h.Topic, "queueId": strconv.Itoa(h.QueueId)}
}

// earliestStoreTime asks the broker for the store time of the oldest
// message one queue still holds. The broker answers success with -1 for a
// queue that holds no message (and for one whose first message it can no
// longer read), reported as the zero time.
func (a *admin) earliestStoreTime(ctx context.Context, addr, topic string, queueID int) (time.Time, error) {
	cmd := remote.NewRemotingCommand(reqGetEarliestMsgStoreTime,
		&getEarliestMsgStoreTimeRequestHeader{Topic: topic, QueueId: queueID}, nil)
	res, err := a.cli.InvokeSync(ctx, addr, cmd, offsetRequestTimeout)
	if err != nil {
		return time.Time{}, err
	}
	if res.Code != internal.ResSuccess {
		return time.Time{}, fmt.Errorf("broker answered code %d: %s", res.Code, res.Remark)
	}
	ms, err := strconv.ParseInt(res.ExtFields["timestamp"], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	if ms <= 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms), nil
}

// getConsumerConnectionListRequestHeader is the header of
// GET_CONSUMER_CONNECTION_LIST.
type getConsumerConnectionListRequestHeader struct {
	ConsumerGroup string
}

// Encode implements remote.CustomHeader.
func (h *getConsumerConnectionListRequestHeader) Encode() map[string]string {
	return map[string]string{"consumerGroup": h.ConsumerGroup}
}

// consumerConnection is the part of the broker's ConsumerConnection body
// that ConsumerOnline reads.
type consumerConnection struct {
	ConnectionSet []struct {
		ClientID string `json:"clientId"`
	} `json:"connectionSet"`
}

// ConsumerOnline returns how many clients of the consumer group are
// connected to the master brokers of topic's route: it asks each for the
// group's connections (GET_CONSUMER_CONNECTION_LIST, 203) and counts the
// distinct client IDs (a consumer sends its heartbeat to every broker, so
// each master usually knows every client). A broker that knows no client
// of the group answers CONSUMER_NOT_ONLINE (206), which counts none. It
// only reads. Calls on one admin must not overlap when it has credentials
// (see ConsumeOffsets). (orderflow patch)
func (a *admin) ConsumerOnline(ctx context.Context, group, topic string) (int, error) {
	topic = utils.WrapNamespace(a.opts.Namespace, topic)
	group = utils.WrapNamespace(a.opts.Namespace, group)
	_, addrs, err := a.readableQueues(topic)
	if err != nil {
		return 0, err
	}
	if len(addrs) == 0 {
		return 0, fmt.Errorf("topic %s: no master broker in the route", topic)
	}
	a.cli.RegisterACL()
	clients := map[string]struct{}{}
	for _, addr := range addrs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		cmd := remote.NewRemotingCommand(reqGetConsumerConnectionList,
			&getConsumerConnectionListRequestHeader{ConsumerGroup: group}, nil)
		res, err := a.cli.InvokeSync(ctx, addr, cmd, offsetRequestTimeout)
		if err != nil {
			return 0, fmt.Errorf("connections of group %s on broker %s: %w", group, addr, err)
		}
		switch res.Code {
		case internal.ResSuccess:
			var cc consumerConnection
			if err := json.Unmarshal(res.Body, &cc); err != nil {
				return 0, fmt.Errorf("connections of group %s on broker %s: decode the answer: %w", group, addr, err)
			}
			for i, c := range cc.ConnectionSet {
				id := c.ClientID
				if id == "" {
					id = addr + "#" + strconv.Itoa(i)
				}
				clients[id] = struct{}{}
			}
		case resConsumerNotOnline:
		default:
			return 0, fmt.Errorf("connections of group %s on broker %s: broker answered code %d: %s", group, addr, res.Code, res.Remark)
		}
	}
	return len(clients), nil
}

// UpdateConsumerOffset sets the consumer group's committed offset of queue q
// to offset on q's master broker (UPDATE_CONSUMER_OFFSET, 15, sent as a
// request, not one-way as the client's offset store sends it), resolving
// the master from the name servers. Any answer but success is an error
// naming the broker's code and remark. A client of the group that holds
// the queue keeps its own offset and commits it again within seconds, over
// this one: update only a group that has no client online
// (ConsumerOnline). (orderflow patch)
func (a *admin) UpdateConsumerOffset(ctx context.Context, group string, q primitive.MessageQueue, offset int64) error {
	topic := utils.WrapNamespace(a.opts.Namespace, q.Topic)
	group = utils.WrapNamespace(a.opts.Namespace, group)
	if err := ctx.Err(); err != nil {
		return err
	}
	queues, _, err := a.readableQueues(topic)
	if err != nil {
		return err
	}
	addr := ""
	for _, bq := range queues {
		if bq.queue.BrokerName == q.BrokerName && bq.queue.QueueId == q.QueueId {
			addr = bq.addr
			break
		}
	}
	if addr == "" {
		return fmt.Errorf("topic %s has no readable queue %d on broker %s", topic, q.QueueId, q.BrokerName)
	}
	a.cli.RegisterACL()
	cmd := remote.NewRemotingCommand(internal.ReqUpdateConsumerOffset, &internal.UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueId: q.QueueId, CommitOffset: offset}, nil)
	res, err := a.cli.InvokeSync(ctx, addr, cmd, offsetRequestTimeout)
	if err != nil {
		return fmt.Errorf("offset of group %s on %s queue %d on broker %s (%s): %w", group, topic, q.QueueId, q.BrokerName, addr, err)
	}
	if res.Code != internal.ResSuccess {
		return fmt.Errorf("offset of group %s on %s queue %d on broker %s (%s): broker answered code %d: %s",
			group, topic, q.QueueId, q.BrokerName, addr, res.Code, res.Remark)
	}
	return nil
}
