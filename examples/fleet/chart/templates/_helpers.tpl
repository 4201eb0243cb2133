{{/* The chart's name, or nameOverride. */}}
{{- define "kubeplex-fleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's when it contains the chart's name, else both. */}}
{{- define "kubeplex-fleet.fullname" -}}
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

{{/* What selects the operator's Pods. */}}
{{- define "kubeplex-fleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeplex-fleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels. */}}
{{- define "kubeplex-fleet.labels" -}}
{{ include "kubeplex-fleet.selectorLabels" . }}
app.kubernetes.io/part-of: kubeplex-fleet
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The namespace of the member Secrets. */}}
{{- define "kubeplex-fleet.membersNamespace" -}}
{{- default .Release.Namespace .Values.members.namespace }}
{{- end }}

{{/* The namespace of the Leases. */}}
{{- define "kubeplex-fleet.leaseNamespace" -}}
{{- default .Values.namespace .Values.leaseNamespace }}
{{- end }}

{{/* Refuses values that cannot work, in words. */}}
{{- define "kubeplex-fleet.validate" -}}
{{- if not (has .Values.mode (list "single" "leaderElection" "shards")) }}
{{- fail (printf "mode: %q is not single, leaderElection or shards" .Values.mode) }}
{{- end }}
{{- if and (eq .Values.mode "single") (gt (int .Values.replicas) 1) }}
{{- fail "mode single runs one replica: with more, each would reconcile everything; use leaderElection or shards" }}
{{- end }}
{{- if and (eq .Values.mode "shards") (lt (int .Values.shards) 1) }}
{{- fail "shards: at least 1" }}
{{- end }}
{{- if and .Values.members.enabled (not .Values.members.selector) }}
{{- fail "members.selector: a label selector such as kubeplex.io/fleet=prod (an empty one would take every Secret of the namespace)" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled .Values.metrics.secure (not .Values.metrics.certSecret) (not .Values.serviceMonitor.insecureSkipVerify) }}
{{- fail "serviceMonitor: the scrape verifies the operator's certificate, and without metrics.certSecret it is signed by itself: set metrics.certSecret (e.g. a cert-manager Certificate's Secret), or serviceMonitor.insecureSkipVerify=true to scrape unverified" }}
{{- end }}
{{- if and .Values.webhooks.enabled (not (has .Values.webhooks.failurePolicy (list "Fail" "Ignore"))) }}
{{- fail (printf "webhooks.failurePolicy: %q is not Fail or Ignore" .Values.webhooks.failurePolicy) }}
{{- end }}
{{- if and .Values.webhooks.enabled (or (lt (int .Values.webhooks.timeoutSeconds) 1) (gt (int .Values.webhooks.timeoutSeconds) 30)) }}
{{- fail "webhooks.timeoutSeconds: 1 to 30 (the API server's bounds)" }}
{{- end }}
{{- if not (has .Values.members.leavePolicy (list "delete" "orphan")) }}
{{- fail (printf "members.leavePolicy: %q is not delete or orphan" .Values.members.leavePolicy) }}
{{- end }}
{{- end }}

{{/*
The rules of the operator's Roles in the control cluster, by namespace: what `fleet rbac --context control`
prints for the same flags (tests/chart checks that they agree for every mode).
*/}}
{{- define "kubeplex-fleet.controlRules" -}}
{{- $rules := dict }}
{{- $events := dict "apiGroups" (list "events.k8s.io") "resources" (list "events") "verbs" (list "create" "patch") }}
{{- $ns := .Values.namespace }}
{{- $own := list
  (dict "apiGroups" (list "demo.kubeplex.dev") "resources" (list "appdeployments") "verbs" (list "get" "list" "watch" "patch"))
  (dict "apiGroups" (list "demo.kubeplex.dev") "resources" (list "appdeployments/finalizers") "verbs" (list "update" "patch"))
  (dict "apiGroups" (list "demo.kubeplex.dev") "resources" (list "appdeployments/status") "verbs" (list "patch"))
  $events }}
{{- $_ := set $rules $ns $own }}
{{- if ne .Values.mode "single" }}
{{- $verbs := list "get" "create" "update" }}
{{- if eq .Values.mode "shards" }}{{ $verbs = list "get" "list" "create" "update" "delete" }}{{ end }}
{{- $lease := dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" $verbs }}
{{- $leaseNs := include "kubeplex-fleet.leaseNamespace" . }}
{{- $_ := set $rules $leaseNs (prepend (get $rules $leaseNs | default list) $lease) }}
{{- end }}
{{- if .Values.webhooks.enabled }}
{{- /* The webhooks' CA, made by the first replica and read by the others (docs/webhooks.md). */}}
{{- $ca := dict "apiGroups" (list "") "resources" (list "secrets") "verbs" (list "get" "create") }}
{{- $leaseNs := include "kubeplex-fleet.leaseNamespace" . }}
{{- $_ := set $rules $leaseNs (append (get $rules $leaseNs | default list) $ca) }}
{{- end }}
{{- if .Values.members.enabled }}
{{- $membersNs := include "kubeplex-fleet.membersNamespace" . }}
{{- $secrets := dict "apiGroups" (list "") "resources" (list "secrets") "verbs" (list "get" "list" "watch" "patch") }}
{{- $existing := get $rules $membersNs | default list }}
{{- $add := list $secrets }}
{{- if not (has $events $existing) }}{{ $add = append $add $events }}{{ end }}
{{- $_ := set $rules $membersNs (concat $existing $add) }}
{{- end }}
{{- /* The operator asks every cluster which it is: its kube-system Namespace (docs/fleets.md). */}}
{{- $identity := dict "apiGroups" (list "") "resources" (list "namespaces") "verbs" (list "get") }}
{{- $_ := set $rules "kube-system" (append (get $rules "kube-system" | default list) $identity) }}
{{- toJson $rules }}
{{- end }}
