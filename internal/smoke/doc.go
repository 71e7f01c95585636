// Package smoke holds the smoke tests of the local stack: each talks to one
// real service (PostgreSQL, Temporal, RocketMQ, Redis) the way orderflow
// does, and a check of docker-compose.yml against the code's defaults. A
// test fails, never skips, when a service is down, and says to run `make
// up`.
package smoke
