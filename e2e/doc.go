// Package e2e holds orderflow's end-to-end test: the real worker and bridge
// binaries, run as processes against the real RocketMQ broker, Temporal
// server and PostgreSQL, consume a scenario full of duplicates, reordering,
// gaps, conflicts and bad messages while they are SIGKILLed and restarted and
// the Temporal server restarts; the five invariants of docs/design.md must hold
// afterwards. Run it with `make test` (or `go test ./e2e`) after `make up`.
package e2e
