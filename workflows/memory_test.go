package workflows

import "testing"

func TestVerifiesMemory(t *testing.T) {
	for _, tc := range []struct {
		changes []string
		want    bool
	}{
		{nil, false},
		{[]string{"local-db-activities-4", "carry-pending-signals-1"}, false},
		{[]string{"carry-pending-signals-1", "local-db-activities-5"}, true},
		{[]string{"local-db-activities-12"}, true},
		{[]string{"other-change-7"}, false},
		{[]string{"local-db-activities-x"}, false},
	} {
		if got := VerifiesMemory(tc.changes); got != tc.want {
			t.Errorf("VerifiesMemory(%q) = %v, want %v", tc.changes, got, tc.want)
		}
	}
}
