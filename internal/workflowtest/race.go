//go:build race

package workflowtest

import "time"

// deadlockDetection is the workflow worker's DeadlockDetectionTimeout under
// the race detector. The SDK fails a workflow task whose workflow code runs
// longer than a second without blocking, by the wall clock. The race
// detector makes JSON about 25 times slower: the task that continues a hot
// order as new, decoding and sizing over a thousand carried events (about
// 15 ms in a plain build), then takes over a second on a loaded machine,
// and fails each time it is retried. Ten seconds still catches workflow
// code that blocks.
const deadlockDetection = 10 * time.Second
