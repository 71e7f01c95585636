package store

import "testing"

// TestArrayLiterals: the array parameters' literals, in PostgreSQL's array
// syntax (a text element quoted, its quotes and backslashes escaped).
func TestArrayLiterals(t *testing.T) {
	v, err := textArray{`a`, `b"c`, `d\e`, ``}.Value()
	if want := `{"a","b\"c","d\\e",""}`; err != nil || v != want {
		t.Errorf("text[] %v (%v), want %s", v, err, want)
	}
	v, err = bigintArray{1, -2, 9007199254740993}.Value()
	if want := `{1,-2,9007199254740993}`; err != nil || v != want {
		t.Errorf("bigint[] %v (%v), want %s", v, err, want)
	}
	if v, _ := (textArray{}).Value(); v != `{}` {
		t.Errorf("empty text[] %v", v)
	}
}
