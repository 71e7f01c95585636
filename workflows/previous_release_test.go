package workflows_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/workflows"
)

// previousRelease is the newest release CHANGELOG.md names with its commit
// ("## 0.1.0 — 26ff85a").
func previousRelease(t *testing.T) (name, commit string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## ([0-9]+\.[0-9]+\.[0-9]+) — ([0-9a-f]{7,40})$`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("CHANGELOG.md names no release with its commit (## X.Y.Z — COMMIT)")
	}
	return m[1], m[2]
}

// TestPreviousReleaseReplays checks the rollback half of a rollout: the
// histories this code records when told to write the previous release's
// workflow version (testdata/w<version>-*, see recordWriteEnv) replay on
// that release's own code, checked out from its commit: its
// TestReplayRecordedHistories runs on them. The other half, the previous
// release's histories on this code, is TestReplayRecordedHistories here
// (testdata/v4-*).
func TestPreviousReleaseReplays(t *testing.T) {
	testenv.SkipShort(t, "git and Go, to build the previous release")
	release, commit := previousRelease(t)
	files, err := filepath.Glob(filepath.Join("testdata", fmt.Sprintf("w%d-*.json", workflows.PreviousReleaseVersion)))
	if err != nil || len(files) == 0 {
		t.Fatalf("no history recorded at the previous release's version %d in testdata/ (%v): record them with %s", workflows.PreviousReleaseVersion, err, recordWriteEnv)
	}
	// A shallow clone lacks the release's commit: deepen it from its origin.
	if exec.Command("git", "-C", "..", "cat-file", "-e", commit+"^{commit}").Run() != nil {
		if out, err := exec.Command("git", "-C", "..", "fetch", "--quiet", "--unshallow").CombinedOutput(); err != nil {
			t.Logf("git fetch --unshallow: %v\n%s", err, out)
		}
	}
	dir := filepath.Join(t.TempDir(), "release-"+release)
	if out, err := exec.Command("git", "-C", "..", "worktree", "add", "--detach", dir, commit).CombinedOutput(); err != nil {
		t.Fatalf("check out release %s (%s): %v\n%s(a shallow clone lacks it: git fetch --unshallow)", release, commit, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("git", "-C", "..", "worktree", "remove", "--force", dir).Run() })
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "workflows", "testdata", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^TestReplayRecordedHistories$", "./workflows")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release %s (%s) does not replay this code's histories: %v\n%s", release, commit, err, tail(string(out), 4000))
	}
	for _, f := range files {
		if want := "--- PASS: TestReplayRecordedHistories/" + filepath.Base(f); !strings.Contains(string(out), want) {
			t.Errorf("release %s did not replay %s:\n%s", release, filepath.Base(f), tail(string(out), 4000))
		}
	}
	t.Logf("release %s (%s) replayed %d histories this code recorded at workflow version %d", release, commit, len(files), workflows.PreviousReleaseVersion)
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }
