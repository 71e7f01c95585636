// Package obs is orderflow's process plumbing shared by the worker and the
// bridge: a JSON slog logger, a Prometheus registry that also carries the
// Temporal SDK's metrics, a Temporal client built with both, an HTTP server
// with /metrics, /healthz and /readyz, and signal-driven shutdown.
package obs
