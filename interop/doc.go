// Package interop holds orderflow's compatibility suite with clients this
// project did not write: the official RocketMQ Java clients. Small Java
// programs (java/src, compiled by the test with javac against the jars
// `make up` caches) publish generated scenarios (package scenario) with the
// remoting client org.apache.rocketmq:rocketmq-client 5.3.3 (zlib, zstd and
// lz4 compression, batches, a queue selector, several keys, user
// properties, producer retries, transactional messages) and with the
// RocketMQ 5 gRPC client org.apache.rocketmq:rocketmq-client-java through
// the stack's proxy (normal, FIFO and transactional messages); orderflow's
// real worker and bridge consume them, and the checker (package check)
// judges the tables against the scenario's expectations. Run it with
// `make test` (or `go test ./interop`) after `make up`.
package interop
