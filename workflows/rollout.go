package workflows

import (
	"fmt"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Versions of ChangeLocalActivities. A run records the version once, at its
// start, and keeps its behaviour for its whole life.
const (
	// LatestVersion is the newest version this code replays and, by
	// default, records.
	LatestVersion = int(versionLoadWithFirst)
	// Release010Version, Release020Version and Release030Version are the
	// newest versions each release replays: a rollout from that release
	// records it until the new build is promoted.
	Release010Version = int(versionLeanTasks)
	Release020Version = int(versionVerifyMemory)
	Release030Version = int(versionStartStatus)
	// PreviousReleaseVersion is the newest version the previous release
	// (CHANGELOG.md) replays: while it is below LatestVersion, a rollout
	// that may be rolled back records it (WriteVersionProvider).
	PreviousReleaseVersion = Release030Version
	// OldestWriteVersion is the oldest version new runs may be told to
	// record: the newest 0.1.0 replays.
	OldestWriteVersion = Release010Version
)

// CheckWriteVersion returns an error unless v is a version of
// ChangeLocalActivities that new runs may record.
func CheckWriteVersion(v int) error {
	if v < OldestWriteVersion || v > LatestVersion {
		return fmt.Errorf("workflow version %d: new runs record %d (what 0.1.0 replays) to %d (the newest)",
			v, OldestWriteVersion, LatestVersion)
	}
	return nil
}

// WriteVersionProvider makes new runs record version v of
// ChangeLocalActivities instead of the newest this code supports, so that a
// release can ship a workflow change its predecessor cannot replay while
// still writing what the predecessor replays: workers of both releases then
// take each other's runs, and a rollback strands nothing. Once no worker of
// the predecessor runs, the next rollout raises v. Other change IDs record
// their newest version.
func WriteVersionProvider(v int) worker.PreferredVersionProvider {
	return func(in worker.PreferredVersionProviderInput) *worker.VersionPreference {
		if in.ChangeID != ChangeLocalActivities {
			return nil
		}
		return &worker.VersionPreference{Version: workflow.Version(v), ClampToSupportedRange: true}
	}
}
