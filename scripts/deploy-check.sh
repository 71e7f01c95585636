#!/usr/bin/env bash
# deploy-check: lint the Helm chart, render it with its default values, the
# production values and every ci/*-values.yaml, and validate what it renders
# with kubeconform against the JSON schemas of Kubernetes (and of the
# Prometheus Operator's ServiceMonitor and PrometheusRule), in strict mode.
#
# Everything comes from the Go module proxy and is cached outside the clone
# (ORDERFLOW_CACHE, default ~/.cache/orderflow):
#   - helm and kubeconform, built at pinned versions into $ORDERFLOW_CACHE/tools;
#   - the schemas, which kubeconform would otherwise download from GitHub:
#     deploy/kubeschema makes them from the OpenAPI document each
#     Kubernetes release publishes (api/openapi-spec/swagger.json in the
#     k8s.io/kubernetes module) and from the Prometheus Operator's CRDs (its
#     module's example/prometheus-operator-crd), both fetched with
#     `go mod download`, which checks them against sum.golang.org.
# Finally it shows that the schemas bite: a manifest with a misspelt field
# must be rejected.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
CACHE=${ORDERFLOW_CACHE:-$HOME/.cache/orderflow}
TOOLS=$CACHE/tools
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KUBECONFORM_VERSION=${KUBECONFORM_VERSION:-v0.8.0}
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion >= 1.25
# allows older, but the module proxy serves none before 1.29 besides 1.13)
# and the newest the proxy serves.
KUBERNETES_VERSIONS=${KUBERNETES_VERSIONS:-"1.30.14 1.37.2"}
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
CHART=deploy/helm/orderflow
HELM=$TOOLS/helm-$HELM_VERSION
KUBECONFORM=$TOOLS/kubeconform-$KUBECONFORM_VERSION

say() { printf 'deploy-check: %s\n' "$*"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# helm keeps its own configuration and caches here, not in ~/.config.
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data

# download MODULE@VERSION: the module's directory in the module cache.
download() {
	(cd "$work" && GOFLAGS=-mod=mod "$GO" mod download -json "$1") |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# install NAME PACKAGE VERSION [LDFLAGS]: build a tool into the cache once.
install() {
	local name=$1 pkg=$2 version=$3 ldflags=${4:-} dest=$TOOLS/$1-$3
	[ -x "$dest" ] && return 0
	say "building $name $version from the module proxy (first run only)"
	mkdir -p "$TOOLS/.build-$name"
	GOBIN=$TOOLS/.build-$name "$GO" install -trimpath -ldflags "$ldflags" "$pkg@$version"
	mv "$TOOLS/.build-$name/$name" "$dest"
	rmdir "$TOOLS/.build-$name"
}

# helm's release builds tell it, at link time, its version and the
# Kubernetes version its client libraries speak (the default of
# --kube-version); a plain `go install` would leave 1.20.
helm_mod=$(cd "$work" && GOFLAGS=-mod=mod "$GO" mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
k8s_minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2] }' "$helm_mod")
install helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" "-s -w \
 -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor"
install kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION" "-s -w"
say "helm $("$HELM" version --template '{{ .Version }}'), kubeconform $KUBECONFORM_VERSION"

# The schemas, made fresh (a second each) so that they follow deploy/kubeschema.
operator=$(download "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
crds=("$operator/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
	"$operator/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml")
"$GO" build -o "$work/kubeschema" ./deploy/kubeschema
for kv in $KUBERNETES_VERSIONS; do
	k8s=$(download "k8s.io/kubernetes@v$kv")
	"$work/kubeschema" -swagger "$k8s/api/openapi-spec/swagger.json" -kubernetes-version "$kv" \
		-out "$work/schemas" "${crds[@]}" >/dev/null
done
schema_location="$work/schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"

# The values files: defaults, production, and the chart's ci/ files; the
# rules and the dashboard are passed as docs/deploying.md says.
files=(--set-file prometheusRule.rules=deploy/prometheus/orderflow-rules.yml
	--set-file grafanaDashboard.json=deploy/grafana/orderflow.json)
# The defaults hold no database URL (rendering fails without one): "default"
# gives the two values required, the runtime role's URL and the owner's for
# the migration Job.
declare -A sets=(
	[default]="--set secrets.databaseURL=postgres://orderflow_app:example@postgresql:5432/orderflow?sslmode=verify-full --set migration.databaseURL=postgres://orderflow:example@postgresql:5432/orderflow?sslmode=verify-full"
	[production]="-f $CHART/values-production.yaml"
)
for f in "$CHART"/ci/*-values.yaml; do
	sets[ci-$(basename "$f" -values.yaml)]="-f $f"
done
# helm template renders a first install; an upgrade (--is-upgrade) also runs
# the build it upgrades from (worker.versioning.current) beside the new one.
upgrade=(default ci-rollout ci-worker-controller)
for name in "${upgrade[@]}"; do
	sets[$name-upgrade]=${sets[$name]}
done

for kv in $KUBERNETES_VERSIONS; do
	for name in $(printf '%s\n' "${!sets[@]}" | sort); do
		# shellcheck disable=SC2086 # the values flags split on purpose
		"$HELM" lint --strict --quiet --kube-version "$kv" $CHART ${sets[$name]} "${files[@]}" >"$work/lint.out" 2>&1 ||
			{ cat "$work/lint.out"; say "FAIL: helm lint ($name values, Kubernetes $kv)"; exit 1; }
		out=$work/$name-$kv.yaml
		is_upgrade=()
		[[ $name == *-upgrade ]] && is_upgrade=(--is-upgrade)
		# shellcheck disable=SC2086
		"$HELM" template orderflow $CHART --namespace orderflow --kube-version "$kv" "${is_upgrade[@]}" ${sets[$name]} "${files[@]}" >"$out"
		# The Temporal Worker Controller's WorkerDeployment and Connection are
		# checked against its CRD schema by TestChartWorkerControllerResources
		# (deploy/workercontroller/crd-facts.json), below.
		summary=$("$KUBECONFORM" -strict -summary -skip WorkerDeployment,Connection -kubernetes-version "$kv" -schema-location "$schema_location" "$out") ||
			{ echo "$summary"; say "FAIL: kubeconform ($name values, Kubernetes $kv)"; exit 1; }
		kinds=$(sed -n 's/^kind: //p' "$out" | sort | uniq -c | awk '{printf "%s%s×%s", sep, $2, $1; sep=", "}')
		say "Kubernetes $kv, $name values: helm lint ok; ${summary#Summary: } ($kinds)"
	done
done

# The schemas must reject what the API server would: a misspelt field, a
# string where an integer goes.
bad=$work/bad.yaml
sed -e 's/^  replicas:/  replica:/' -e 's/containerPort: 9090/containerPort: "9090"/' "$work/default-${KUBERNETES_VERSIONS%% *}.yaml" >"$bad"
if "$KUBECONFORM" -strict -kubernetes-version "${KUBERNETES_VERSIONS%% *}" -schema-location "$schema_location" "$bad" >"$work/bad.out" 2>&1; then
	say "FAIL: kubeconform accepted a manifest with a misspelt field"
	exit 1
fi
say "a misspelt field and a mistyped port are rejected: $(grep -o "additional properties '[a-z]*' not allowed" "$work/bad.out" | head -1); $(grep -o 'got string, want integer' "$work/bad.out" | head -1)"

# Values the chart refuses, with a message that says why.
refuse() {
	local what=$1 why=$2
	shift 2
	if "$HELM" template orderflow $CHART "$@" >/dev/null 2>"$work/refuse.out"; then
		say "FAIL: helm template accepted $what"
		exit 1
	fi
	grep -q -- "$why" "$work/refuse.out" ||
		{ cat "$work/refuse.out"; say "FAIL: $what refused without saying: $why"; exit 1; }
}
refuse "secrets.create=false without existingSecret" "name the Secret holding DATABASE_URL" --set secrets.create=false
owner=(--set "migration.databaseURL=postgres://o:p@db:5432/orderflow?sslmode=verify-full")
refuse "the default values (no database URL)" "secrets.databaseURL is required" "${owner[@]}"
refuse "a database URL with sslmode=disable" "secrets.insecureDatabase=true" --set "secrets.databaseURL=postgres://u:p@db:5432/orderflow?sslmode=disable" "${owner[@]}"
refuse "a database URL with sslmode=allow" "secrets.insecureDatabase=true" --set "secrets.databaseURL=postgres://u:p@db:5432/orderflow?connect_timeout=5&sslmode=allow" "${owner[@]}"
refuse "the migration Job without the owner's URL" "migration.databaseURL (the database owner's URL" --set "secrets.databaseURL=postgres://u:p@db:5432/orderflow?sslmode=verify-full"
refuse "the owner's URL without TLS" "migration.databaseURL has sslmode=disable" --set "secrets.databaseURL=postgres://u:p@db:5432/orderflow?sslmode=verify-full" --set "migration.databaseURL=postgres://o:p@db:5432/orderflow?sslmode=disable"
refuse "the runtime URL as the owner's" "migration.databaseURL equals secrets.databaseURL" --set "secrets.databaseURL=postgres://u:p@db:5432/orderflow?sslmode=verify-full" --set "migration.databaseURL=postgres://u:p@db:5432/orderflow?sslmode=verify-full"
refuse "a misspelt value" "additional properties 'replica' not allowed" --set worker.replica=3
refuse "prometheusRule without the rules file" "pass the rules file with --set-file" --set prometheusRule.enabled=true --set "secrets.databaseURL=postgres://u:p@db:5432/orderflow?sslmode=verify-full" "${owner[@]}"
say "values without a Secret or a database URL, a database URL without TLS (unless secrets.insecureDatabase), a migration Job without the owner's URL, an owner's URL without TLS or equal to the runtime one, a misspelt value and a PrometheusRule without rules are refused"

# The two database roles: the Job alone reads the owner's URL, the worker
# and the bridge the runtime role's (the deploy package's chart tests).
ORDERFLOW_HELM=$HELM "$GO" test -count=1 -run 'TestChart(Splits|Refuses|RunsOneWorker|OpsJob|UpgradesSafely|WorkerController)' ./deploy >"$work/roles.out" 2>&1 ||
	{ cat "$work/roles.out"; say "FAIL: the chart's database roles, builds or operator Job"; exit 1; }
say "the migration Job reads the owner's URL from a Secret of its own; the worker and the bridge the runtime role's; a default upgrade keeps the current build beside the new one, pinned to what the current build replays, no selector overlapping; the operator Job has the bridge's settings; the WorkerDeployment and Connection match the Worker Controller's CRD schema (app version 1.8.1)"
say "ok"
