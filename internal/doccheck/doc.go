// Package doccheck keeps the prose documentation true where a program can
// tell: its test reads README.md, BENCHMARKS.md and docs/*.md and checks
// every environment variable, make target, metric name and repository path
// they name against the code, the Makefile and the tree. docs/configuration.md
// itself is generated from the programs (config/internal/docgen).
package doccheck
