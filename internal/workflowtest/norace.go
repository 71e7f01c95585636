//go:build !race

package workflowtest

// deadlockDetection is the workflow worker's DeadlockDetectionTimeout
// outside the race detector: 0, the SDK's default (a second).
const deadlockDetection = 0
