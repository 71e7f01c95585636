// Package deploy holds orderflow's deployment descriptions: the Grafana
// dashboard (grafana/orderflow.json) and the Prometheus alert rules
// (prometheus/orderflow-rules.yml).
//
// Its tests check them: the rules parse with Prometheus' own rule parser,
// every dashboard query parses as PromQL, and every metric, label and label
// value that a panel or a rule names is exported on /metrics by a running
// worker or bridge (see TestQueriesNameExportedMetrics).
package deploy
