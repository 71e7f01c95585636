{{/* The chart's name, shortened to Kubernetes' 63 characters. */}}
{{- define "orderflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name: the release name when it contains the chart's
name, else <release>-<chart>. Resource names are <fullname>-worker,
<fullname>-bridge, ...
*/}}
{{- define "orderflow.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "orderflow.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "orderflow.labels" -}}
helm.sh/chart: {{ include "orderflow.chart" . }}
app.kubernetes.io/name: {{ include "orderflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: orderflow
{{- end }}

{{/* Selector labels of a component: include with (dict "ctx" $ "component" "worker"). */}}
{{- define "orderflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "orderflow.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
The rollout state, as a dict: what this revision runs and routes to.
  newTag, newBuild: this release's image tag and build ID;
  promoted: this release's build takes the tasks (worker.versioning.promote,
    a first install, or current naming this build already);
  pin: the workflow version this release's workers write (0: their newest):
    current.workflowVersion, the newest the build this release upgrades from
    replays, until the values name this release's build as current;
  bridgeTag: the bridges' image tag (bridge.imageTag, else current's until
    promoted);
  target: the build the set-current hook makes current ("" for unversioned).
*/}}
{{- define "orderflow.rollout" -}}
{{- $vv := .Values.worker.versioning }}
{{- $cur := $vv.current | default dict }}
{{- $newTag := .Values.image.tag | default .Chart.AppVersion }}
{{- $newBuild := $vv.buildId | default $newTag }}
{{- $settled := false }}
{{- $wc := .Values.workerController | default dict }}
{{- if $wc.enabled }}
{{- $settled = and (not $vv.unversioned) (eq (toString $cur.tag) $newTag) }}
{{- else if $vv.deploymentName }}
{{- $settled = and (not $vv.unversioned) (eq (toString $cur.buildId) $newBuild) }}
{{- else }}
{{- $settled = eq (toString $cur.tag) $newTag }}
{{- end }}
{{- $promoted := or $vv.promote .Release.IsInstall $settled (not $cur.tag) }}
{{- $pin := 0 }}
{{- if not (or $settled .Release.IsInstall (not $cur.tag)) }}
{{- $pin = $cur.workflowVersion | default 0 }}
{{- end }}
{{- $bridgeTag := .Values.bridge.imageTag }}
{{- if and (not $bridgeTag) (not $promoted) }}
{{- $bridgeTag = $cur.tag }}
{{- end }}
{{- $target := $newBuild }}
{{- if not $promoted }}
{{- $target = ternary "" (toString $cur.buildId) (not (not $vv.unversioned)) }}
{{- end }}
newTag: {{ $newTag | quote }}
newBuild: {{ $newBuild | quote }}
promoted: {{ $promoted }}
pin: {{ $pin }}
bridgeTag: {{ $bridgeTag | default "" | quote }}
target: {{ $target | quote }}
{{- end }}

{{/* A build ID as the suffix of a Kubernetes name and a label value. */}}
{{- define "orderflow.buildLabel" -}}
{{- regexReplaceAll "[^a-z0-9-]+" (lower .) "-" | trunc 40 | trimAll "-" }}
{{- end }}

{{/*
The worker Deployments to run, as a YAML list. Without
worker.versioning.deploymentName: one unversioned Deployment, <fullname>-worker.
With it: this release's build, <fullname>-worker-<build>, and, until it is
promoted, the build it upgrades from beside it (worker.versioning.current), on
its own image: <fullname>-worker-<build>, or <fullname>-worker-unversioned when
worker.versioning.unversioned (the upgrade that turns versioning on). Each versioned
Deployment's selector has a label of its own (orderflow.io/worker-build), so
that no Deployment, autoscaler or disruption budget counts another's pods.
*/}}
{{- define "orderflow.workerBuilds" -}}
{{- $vv := .Values.worker.versioning }}
{{- $cur := $vv.current | default dict }}
{{- $r := include "orderflow.rollout" . | fromYaml }}
{{- $wc := .Values.workerController | default dict }}
{{- if $wc.enabled }}
{{- /* The Worker Controller runs the versioned workers (worker-controller.yaml); unversioned ones stay until promoted. */}}
{{- if and $vv.unversioned (not $r.promoted) }}
- suffix: "-unversioned"
  label: unversioned
  tag: {{ $cur.tag | quote }}
  workflowVersion: 0
{{- end }}
{{- else if not $vv.deploymentName }}
- suffix: ""
  tag: ""
  workflowVersion: {{ $r.pin }}
{{- else }}
{{- $newLabel := include "orderflow.buildLabel" $r.newBuild }}
{{- if not $r.promoted }}
{{- if $vv.unversioned }}
- suffix: "-unversioned"
  label: unversioned
  tag: {{ $cur.tag | quote }}
  workflowVersion: 0
{{- else }}
{{- $label := include "orderflow.buildLabel" (toString $cur.buildId) }}
{{- if eq $label $newLabel }}
{{- fail (printf "worker.versioning.current.buildId %q and this release's build %q make the same Deployment name" $cur.buildId $r.newBuild) }}
{{- end }}
- suffix: {{ printf "-%s" $label | quote }}
  label: {{ $label | quote }}
  buildId: {{ $cur.buildId | quote }}
  tag: {{ $cur.tag | quote }}
  workflowVersion: 0
{{- end }}
{{- end }}
- suffix: {{ printf "-%s" $newLabel | quote }}
  label: {{ $newLabel | quote }}
  buildId: {{ $r.newBuild | quote }}
  tag: ""
  workflowVersion: {{ $r.pin }}
{{- end }}
{{- end }}

{{- define "orderflow.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* An image of the chart's repository at tag, or the chart's image when tag is empty: include with (dict "ctx" $ "tag" "0.2.0"). */}}
{{- define "orderflow.imageAt" -}}
{{- if .tag }}
{{- printf "%s:%s" .ctx.Values.image.repository .tag }}
{{- else }}
{{- include "orderflow.image" .ctx }}
{{- end }}
{{- end }}

{{- define "orderflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "orderflow.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding DATABASE_URL and the other secret settings. */}}
{{- define "orderflow.secretName" -}}
{{- if .Values.secrets.create }}
{{- include "orderflow.fullname" . }}
{{- else }}
{{- required "secrets.existingSecret: name the Secret holding DATABASE_URL (or set secrets.create=true)" .Values.secrets.existingSecret }}
{{- end }}
{{- end }}

{{/* The Secret and key holding the owner's DATABASE_URL for the migration Job. */}}
{{- define "orderflow.migrationSecretName" -}}
{{- if .Values.migration.existingSecret }}
{{- .Values.migration.existingSecret }}
{{- else }}
{{- printf "%s-migrate" (include "orderflow.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}
{{- end }}

{{- define "orderflow.migrationSecretKey" -}}
{{- if .Values.migration.existingSecret }}
{{- .Values.migration.existingSecretKey }}
{{- else }}
{{- "DATABASE_URL" }}
{{- end }}
{{- end }}

{{/* Environment variables from a map of name to value; empty values are left out. */}}
{{- define "orderflow.envMap" -}}
{{- range $name, $value := . }}
{{- if ne (toString $value) "" }}
- name: {{ $name }}
  value: {{ toString $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* GOMAXPROCS from the container's CPU request, rounded up to whole
cores (values goMaxProcs): .ctx the root context, .container its name. */}}
{{- define "orderflow.goMaxProcsEnv" -}}
{{- if eq (toString .ctx.Values.goMaxProcs) "request" -}}
- name: GOMAXPROCS
  valueFrom:
    resourceFieldRef:
      containerName: {{ .container }}
      resource: requests.cpu
      divisor: "1"
{{- end }}
{{- end }}

{{/* One variable from the Secret. */}}
{{- define "orderflow.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "orderflow.secretName" .ctx }}
      key: {{ .name }}
      optional: {{ .optional }}
{{- end }}

{{/* DATABASE_URL from the release's Secret: the runtime role's, for the worker and the bridge. */}}
{{- define "orderflow.databaseEnv" -}}
{{ include "orderflow.secretEnv" (dict "ctx" . "name" "DATABASE_URL" "optional" false) }}
{{- end }}

{{/* The Temporal API key and the mTLS file paths: worker and bridge. */}}
{{- define "orderflow.temporalEnv" -}}
{{ include "orderflow.secretEnv" (dict "ctx" . "name" "TEMPORAL_API_KEY" "optional" true) }}
{{- with .Values.temporalTLS }}
{{- if .secretName }}
{{- if .clientCertKey }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: {{ printf "/etc/orderflow/temporal-tls/%s" .clientCertKey | quote }}
{{- end }}
{{- if .clientKeyKey }}
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: {{ printf "/etc/orderflow/temporal-tls/%s" .clientKeyKey | quote }}
{{- end }}
{{- if .serverCACertKey }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: {{ printf "/etc/orderflow/temporal-tls/%s" .serverCACertKey | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The RocketMQ ACL keys from the release's Secret and the TLS settings: worker and bridge. */}}
{{- define "orderflow.rocketmqEnv" -}}
{{ include "orderflow.secretEnv" (dict "ctx" . "name" "ROCKETMQ_ACCESS_KEY" "optional" true) }}
{{ include "orderflow.secretEnv" (dict "ctx" . "name" "ROCKETMQ_SECRET_KEY" "optional" true) }}
{{- with .Values.rocketmqTLS }}
{{- if .enabled }}
- name: ROCKETMQ_TLS
  value: "true"
{{- if .serverName }}
- name: ROCKETMQ_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- if .secretName }}
{{- if .caKey }}
- name: ROCKETMQ_TLS_CA_FILE
  value: {{ printf "/etc/orderflow/rocketmq-tls/%s" .caKey | quote }}
{{- end }}
{{- if .clientCertKey }}
- name: ROCKETMQ_TLS_CERT_FILE
  value: {{ printf "/etc/orderflow/rocketmq-tls/%s" .clientCertKey | quote }}
{{- end }}
{{- if .clientKeyKey }}
- name: ROCKETMQ_TLS_KEY_FILE
  value: {{ printf "/etc/orderflow/rocketmq-tls/%s" .clientKeyKey | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Volumes for the TLS files; include with (dict "ctx" $ "temporal" true "rocketmq" true). */}}
{{- define "orderflow.tlsVolumes" -}}
{{- $ctx := .ctx }}
{{- if and .temporal $ctx.Values.temporalTLS.secretName }}
- name: temporal-tls
  secret:
    secretName: {{ $ctx.Values.temporalTLS.secretName }}
    items:
      {{- range $key := list $ctx.Values.temporalTLS.clientCertKey $ctx.Values.temporalTLS.clientKeyKey $ctx.Values.temporalTLS.serverCACertKey }}
      {{- if $key }}
      - key: {{ $key }}
        path: {{ $key }}
      {{- end }}
      {{- end }}
{{- end }}
{{- if and .rocketmq $ctx.Values.rocketmqTLS.enabled $ctx.Values.rocketmqTLS.secretName }}
- name: rocketmq-tls
  secret:
    secretName: {{ $ctx.Values.rocketmqTLS.secretName }}
    items:
      {{- range $key := list $ctx.Values.rocketmqTLS.caKey $ctx.Values.rocketmqTLS.clientCertKey $ctx.Values.rocketmqTLS.clientKeyKey }}
      {{- if $key }}
      - key: {{ $key }}
        path: {{ $key }}
      {{- end }}
      {{- end }}
{{- end }}
{{- if $ctx.Values.postgresTLS.secretName }}
- name: postgres-tls
  secret:
    secretName: {{ $ctx.Values.postgresTLS.secretName }}
    items:
      - key: {{ $ctx.Values.postgresTLS.caKey }}
        path: ca.crt
{{- end }}
{{- end }}

{{- define "orderflow.tlsVolumeMounts" -}}
{{- $ctx := .ctx }}
{{- if and .temporal $ctx.Values.temporalTLS.secretName }}
- name: temporal-tls
  mountPath: /etc/orderflow/temporal-tls
  readOnly: true
{{- end }}
{{- if and .rocketmq $ctx.Values.rocketmqTLS.enabled $ctx.Values.rocketmqTLS.secretName }}
- name: rocketmq-tls
  mountPath: /etc/orderflow/rocketmq-tls
  readOnly: true
{{- end }}
{{- if $ctx.Values.postgresTLS.secretName }}
- name: postgres-tls
  mountPath: /etc/orderflow/postgres-tls
  readOnly: true
{{- end }}
{{- end }}

{{/* Pod annotations that roll the pods when the chart's Secret changes. */}}
{{- define "orderflow.checksums" -}}
{{- if .Values.secrets.create }}
checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end }}

{{/* The probes on the metrics port. */}}
{{- define "orderflow.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  failureThreshold: {{ .Values.probes.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
{{- end }}
