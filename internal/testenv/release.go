package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Release is a numbered release of orderflow, checked out from its commit.
type Release struct {
	// Name is its number ("0.2.0"); Commit is the commit CHANGELOG.md gives.
	Name, Commit string
	// Dir is a git worktree of the commit, removed when the test ends.
	Dir string
}

// releaseHeading is a CHANGELOG.md heading that names a release and its
// commit: "## 0.2.0 — 774cef3".
var releaseHeading = regexp.MustCompile(`(?m)^## ([0-9]+\.[0-9]+\.[0-9]+) — ([0-9a-f]{7,40})$`)

// gitMu serialises the worktree commands of parallel tests: git locks its
// index and refuses a second `worktree add` meanwhile.
var gitMu sync.Mutex

// PreviousRelease checks out the newest release CHANGELOG.md names with its
// commit into a worktree of its own. A shallow clone lacks the commit: it
// is fetched from the clone's origin first.
func PreviousRelease(t testing.TB) Release {
	t.Helper()
	SkipShort(t, "git, to check out the previous release")
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := releaseHeading.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("CHANGELOG.md names no release with its commit (## X.Y.Z — COMMIT)")
	}
	r := Release{Name: m[1], Commit: m[2], Dir: filepath.Join(t.TempDir(), "release-"+m[1])}
	gitMu.Lock()
	defer gitMu.Unlock()
	if exec.Command("git", "-C", root, "cat-file", "-e", r.Commit+"^{commit}").Run() != nil {
		if out, err := exec.Command("git", "-C", root, "fetch", "--quiet", "--unshallow").CombinedOutput(); err != nil {
			t.Logf("git fetch --unshallow: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", r.Dir, r.Commit).CombinedOutput(); err != nil {
		t.Fatalf("check out release %s (%s): %v\n%s", r.Name, r.Commit, err, out)
	}
	t.Cleanup(func() {
		gitMu.Lock()
		defer gitMu.Unlock()
		_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", r.Dir).Run()
	})
	return r
}

// repoRoot is the top of the git work tree the test runs in.
func repoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the repository's root: %v", err)
	}
	return strings.TrimSpace(string(out))
}
