{{/* Names: the release name, or release-chart when they differ; 63 characters at most. */}}
{{- define "kvgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kvgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kvgate.labels" -}}
{{ include "kvgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "kvgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kvgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kvgate.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The plugin configuration document. exclude_paths and trusted_senders are
written only when set, so that the document stays readable by filters that
predate a member.
*/}}
{{- define "kvgate.filterConfig" -}}
{{- $f := .Values.filter -}}
{{- $doc := dict "trust_kv_hints" $f.trust_kv_hints "max_depth" (int64 $f.max_depth) "max_body_bytes" (int64 $f.max_body_bytes) -}}
{{- if $f.exclude_paths }}{{ $_ := set $doc "exclude_paths" $f.exclude_paths }}{{ end -}}
{{- if $f.trusted_senders }}{{ $_ := set $doc "trusted_senders" $f.trusted_senders }}{{ end -}}
{{- toJson $doc -}}
{{- end -}}

{{/* "true" when kvgate admits hints from someone, so the worker must read them. */}}
{{- define "kvgate.admits" -}}
{{- if or .Values.filter.trust_kv_hints .Values.filter.trusted_senders -}}true{{- end -}}
{{- end -}}

{{/* Rules that name a certificate identity need client certificates. */}}
{{- define "kvgate.checkIdentity" -}}
{{- if ne .Values.mode "istio" -}}
{{- range $i, $r := .Values.filter.trusted_senders -}}
{{- if and (or (hasKey $r "principal") (hasKey $r "dns_name")) (not (and $.Values.tls.enabled $.Values.tls.clientCA.secretName)) -}}
{{- fail (printf "filter.trusted_senders[%d] names a certificate identity: set tls.enabled and tls.clientCA.secretName, or no client can ever match it" $i) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The Envoy stats_tags regex for one label of one filter counter family: the
rule of metricname.Regex (the chart test keeps them equal).
*/}}
{{- define "kvgate.statsTagRegex" -}}
{{- printf "^wasmcustom\\.%s(?:\\.[a-zA-Z_][a-zA-Z0-9_]*\\.[a-zA-Z0-9_]+)*?(\\.%s\\.([a-zA-Z0-9_]+))" .family .label -}}
{{- end -}}
