package config

// docs/configuration.md, the reference of every setting of every program,
// is generated from the programs' usage text; a test in
// ./internal/docgen fails when it is stale.
//go:generate go run ./internal/docgen
