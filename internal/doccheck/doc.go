// Package doccheck keeps the prose documentation true where a program can
// tell. Its tests read README.md, BENCHMARKS.md, CHANGELOG.md and
// docs/*.md and check, with no service running:
//
//   - environment variables and metric names, as whole words of the code
//     outside the tests (a name only a test uses does not count);
//   - make targets against the Makefile, and repository paths against the
//     tree;
//   - orderflow subcommands, their flags and the defaults the pages give,
//     against the settings each program prints with -h (the generated
//     docs/configuration.md, which config/internal/docgen keeps current),
//     and the claims about sets of subcommands (which print JSON, which
//     check the schema, the flag-only settings);
//   - docker compose commands against docker-compose.yml's services and
//     profiles, and chart values against the chart's values.yaml;
//   - temporal CLI commands and options against the pinned release's
//     command list (its module source, from the module cache or proxy);
//   - the figures pages cite from bench/results/*.json against those files;
//   - relative links and their #anchors against the files and headings;
//   - counts of code uses a page gives, Markdown files named in Go
//     comments, and statements the code is known to refute.
//
// The checks are functions over a page's text, so that a test can plant a
// wrong claim and see it reported.
package doccheck
