// Package deploy holds orderflow's deployment descriptions: the Grafana
// dashboard (grafana/orderflow.json), the Prometheus alert rules
// (prometheus/orderflow-rules.yml) and the Helm chart (helm/orderflow).
//
// Its tests check them: the rules parse with Prometheus' own rule parser,
// every dashboard query parses as PromQL, and every metric, label and label
// value that a panel or a rule names is exported on /metrics by a running
// worker or bridge (see TestQueriesNameExportedMetrics), and every
// environment variable the chart sets is one the programs read
// (TestChartSetsOnlyRealSettings). `make deploy-check` lints and renders
// the chart and validates its output with kubeconform.
package deploy
