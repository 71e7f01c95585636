package mq

import (
	"math"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// DefaultMaxReconsumeTimes is ConsumerConfig.MaxReconsumeTimes's default:
// the broker moves a message to the group's %DLQ% topic after this many
// redeliveries.
const DefaultMaxReconsumeTimes = 100000

// delayLevels are the broker's default delays of the message delay levels
// 1–18 (messageDelayLevel "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m
// 30m 1h 2h"), which the local stack and docker-compose keep.
var delayLevels = [...]time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
	7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour,
}

// MaxDelayLevel is the highest delay level the broker knows.
const MaxDelayLevel = len(delayLevels)

// DelayOf is the broker's default delay of a delay level, clamped to 1–18.
func DelayOf(level int) time.Duration {
	return delayLevels[max(1, min(level, MaxDelayLevel))-1]
}

// RetryDelayLevel is the delay level at which a consumer capped at maxLevel
// hands back a message the broker has already redelivered times times: 3
// (10 s) the first time, one level more for each redelivery, up to
// maxLevel.
func RetryDelayLevel(times int32, maxLevel int) int {
	return max(1, min(3+int(max(times, 0)), maxLevel, MaxDelayLevel))
}

// HeldBack is the least time the broker held back a message it has
// redelivered times times to a consumer capped at maxLevel: the sum of the
// delays of the hand-backs (a callback of several messages hands them back
// at the level of the most redelivered one, never lower). The broker
// enforces each delay, so no clock enters the sum.
func HeldBack(times int32, maxLevel int) time.Duration {
	var d time.Duration
	for k := int32(0); k < times; k++ {
		level := RetryDelayLevel(k, maxLevel)
		if level == min(maxLevel, MaxDelayLevel) || level == 1 {
			// Capped from here on: the remaining hand-backs all wait as long.
			rest := time.Duration(times - k)
			if rest > (math.MaxInt64-d)/DelayOf(level) {
				return math.MaxInt64
			}
			return d + rest*DelayOf(level)
		}
		d += DelayOf(level)
	}
	return d
}

// RedeliveriesFor is how many redeliveries it takes for HeldBack to reach
// d at maxLevel.
func RedeliveriesFor(d time.Duration, maxLevel int) int64 {
	n := int64(0)
	for held := time.Duration(0); held < d; n++ {
		held += DelayOf(RetryDelayLevel(int32(min(n, int64(MaxDelayLevel))), maxLevel))
	}
	return n
}

// Failing is how long message m, redelivered m.ReconsumeTimes times, has
// been failing at least, as of now: HeldBack of its redeliveries, but no
// longer than it has existed (since its born timestamp, which the broker
// keeps across redeliveries; left out when missing or in the future, a
// producer's clock ahead of now). HeldBack alone overstates the time when
// the broker refused hand-backs (the client then keeps the message and
// counts a redelivery every few seconds) or when a consumer stopping hands
// messages back at delay level 1; a message's age alone overstates it for a
// message that waited in a backlog before its first failure.
func Failing(m *primitive.MessageExt, maxLevel int, now time.Time) time.Duration {
	held := HeldBack(m.ReconsumeTimes, maxLevel)
	if m.BornTimestamp <= 0 {
		return held
	}
	age := now.Sub(time.UnixMilli(m.BornTimestamp))
	if age < 0 {
		return held
	}
	return min(held, age)
}
