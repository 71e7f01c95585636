package workflows_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/workflows"
)

// versionPrefix is a recorded history's version prefix: v4-, v3s-, w4-.
// Unprefixed files are recorded at LatestVersion.
var versionPrefix = regexp.MustCompile(`^[vw]([0-9]+)s?-`)

// replaysOnPreviousRelease reports whether the history in file was recorded
// at a version of ChangeLocalActivities that the previous release replays.
func replaysOnPreviousRelease(file string) bool {
	m := versionPrefix.FindStringSubmatch(filepath.Base(file))
	if m == nil {
		return workflows.LatestVersion <= workflows.PreviousReleaseVersion
	}
	v, _ := strconv.Atoi(m[1])
	return v <= workflows.PreviousReleaseVersion
}

// TestPreviousReleaseReplays checks the rollback half of a rollout: every
// history this code recorded at a version the previous release replays
// (all of testdata while no one-way change came since; otherwise the files
// recorded at its version, wN-*, see recordWriteEnv) replays on that
// release's own code, checked out from its commit: its
// TestReplayRecordedHistories runs on them. The other half, the older
// releases' histories on this code, is TestReplayRecordedHistories here.
func TestPreviousReleaseReplays(t *testing.T) {
	rel := testenv.PreviousRelease(t)
	all, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range all {
		if replaysOnPreviousRelease(f) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no history recorded at the previous release's version %d in testdata/: record them with %s=%d",
			workflows.PreviousReleaseVersion, recordWriteEnv, workflows.PreviousReleaseVersion)
	}
	// Every scenario, batched signals, continue-as-new and carried batches
	// among them, as this code records it for the release (wN-*, or the
	// unprefixed files while the release replays the newest version),
	// replays on the release.
	ours := fmt.Sprintf("w%d-", workflows.PreviousReleaseVersion)
	for _, sc := range replayScenarios {
		if !slices.ContainsFunc(files, func(f string) bool {
			name := filepath.Base(f)
			if workflows.LatestVersion <= workflows.PreviousReleaseVersion && !versionPrefix.MatchString(name) {
				return strings.HasPrefix(name, sc)
			}
			return strings.HasPrefix(name, ours+sc)
		}) {
			t.Errorf("no history of scenario %s recorded at a version the previous release replays: record it with %s=%s %s=%d",
				sc, recordEnv, sc, recordWriteEnv, workflows.PreviousReleaseVersion)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rel.Dir, "workflows", "testdata", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^TestReplayRecordedHistories$", "./workflows")
	cmd.Dir = rel.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release %s (%s) does not replay this code's histories: %v\n%s", rel.Name, rel.Commit, err, tail(string(out), 4000))
	}
	for _, f := range files {
		if want := "--- PASS: TestReplayRecordedHistories/" + filepath.Base(f); !strings.Contains(string(out), want) {
			t.Errorf("release %s did not replay %s:\n%s", rel.Name, filepath.Base(f), tail(string(out), 4000))
		}
	}
	t.Logf("release %s (%s) replayed %d of this code's %d recorded histories (those at workflow version %d or older)",
		rel.Name, rel.Commit, len(files), len(all), workflows.PreviousReleaseVersion)
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }
