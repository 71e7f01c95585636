package uniq

import (
	"regexp"
	"testing"
)

func TestName(t *testing.T) {
	seen := map[string]bool{}
	re := regexp.MustCompile(`^topic-[0-9a-z]+-[0-9a-f]{8}$`)
	for range 1000 {
		n := Name("topic")
		if !re.MatchString(n) || seen[n] {
			t.Fatalf("Name = %q (seen before: %v)", n, seen[n])
		}
		seen[n] = true
	}
}
