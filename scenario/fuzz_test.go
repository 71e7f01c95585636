package scenario

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadExpected: whatever an expected-state file holds, ReadFile's
// decoding returns an error or an Expected with a prefix and orders, whose
// phases and holes the commands can read without a panic.
func FuzzReadExpected(f *testing.F) {
	s, err := Generate(Options{Orders: 3, Seed: 7, Prefix: "fz", DupRate: 0.5, LateRate: 0.5, GapRate: 0.3, Illegal: 1})
	if err != nil {
		f.Fatal(err)
	}
	valid := filepath.Join(f.TempDir(), "expected.json")
	if err := s.Expected.WriteFile(valid); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(valid)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{string(b), "", "{}", "null", "[]", `{"prefix":""}`, `{"prefix":"p"}`, `{"prefix":"p","orders":[{}]}`,
		`{"prefix":"p","orders":[{}],"holes":[{"from":5,"to":2}],"phases":-3}`, `{"prefix":`, "\x00\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeExpected(data, "expected.json")
		if err != nil {
			if e != nil {
				t.Fatalf("ReadFile failed (%v) but returned %+v", err, e)
			}
			return
		}
		if e.Prefix == "" || len(e.Orders) == 0 {
			t.Fatalf("ReadFile accepted a file without a prefix or orders: %q", data)
		}
		_ = e.FirstPhase().PublishedKeys()
		_ = e.PublishedKeys()
		_ = e.OpenHoles()
	})
}
