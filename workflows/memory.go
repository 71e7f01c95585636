package workflows

import (
	"strconv"
	"strings"
)

// ChangeVersionSearchAttribute is the search attribute in which the SDK
// lists, for each workflow.GetVersion change a run asked for, the version
// it recorded, as "<change ID>-<version>".
const ChangeVersionSearchAttribute = "TemporalChangeVersion"

// VerifiesMemory reports whether a run whose TemporalChangeVersion values
// are changes runs code that asks the database about every event it
// remembers (ChangeLocalActivities version 5 or later). An older run
// skips an event it has recorded on its memory's word alone, so after a
// database restore it drops the redelivered events the database lost:
// such runs are ended by `orderflow recover`.
func VerifiesMemory(changes []string) bool {
	for _, c := range changes {
		v, ok := strings.CutPrefix(c, ChangeLocalActivities+"-")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err == nil && n >= int(versionVerifyMemory) {
			return true
		}
	}
	return false
}
