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
The plugin configuration document. exclude_paths, trusted_senders and
router_only are written only when set, so that the document stays readable
by filters that predate a member.
*/}}
{{- define "kvgate.filterConfig" -}}
{{- $f := .Values.filter -}}
{{- $doc := dict "trust_kv_hints" $f.trust_kv_hints "max_depth" (int64 $f.max_depth) "max_body_bytes" (int64 $f.max_body_bytes) -}}
{{- if $f.grpc }}{{ $_ := set $doc "grpc" $f.grpc }}{{ end -}}
{{- if $f.exclude_paths }}{{ $_ := set $doc "exclude_paths" $f.exclude_paths }}{{ end -}}
{{- if $f.trusted_senders }}{{ $_ := set $doc "trusted_senders" $f.trusted_senders }}{{ end -}}
{{- with include "kvgate.routerOnly" . | fromJson }}{{ $_ := set $doc "router_only" . }}{{ end -}}
{{- toJson $doc -}}
{{- end -}}

{{/*
The engines whose router-only presets apply, as a JSON array:
filter.router_only.engines, or [worker.engine] when that list is empty.
*/}}
{{- define "kvgate.routerOnlyEngines" -}}
{{- $ro := get .Values.filter "router_only" | default dict -}}
{{- $engines := get $ro "engines" | default list -}}
{{- if and (not $engines) .Values.worker.engine }}{{ $engines = list .Values.worker.engine }}{{ end -}}
{{- toJson $engines -}}
{{- end -}}

{{/*
The router_only member as JSON: the engines (kvgate.routerOnlyEngines) and
the members and headers that are set, and untrusted; {} when no field is
named, so that nothing is rendered and the filter guards kv_hints only.
*/}}
{{- define "kvgate.routerOnly" -}}
{{- $ro := get .Values.filter "router_only" | default dict -}}
{{- $engines := include "kvgate.routerOnlyEngines" . | fromJsonArray -}}
{{- $members := get $ro "members" | default list -}}
{{- $headers := get $ro "headers" | default list -}}
{{- $doc := dict -}}
{{- if or $engines $members $headers -}}
{{- if $engines }}{{ $_ := set $doc "engines" $engines }}{{ end -}}
{{- if $members }}{{ $_ := set $doc "members" $members }}{{ end -}}
{{- if $headers }}{{ $_ := set $doc "headers" $headers }}{{ end -}}
{{- $_ := set $doc "untrusted" (get $ro "untrusted" | default "strip") -}}
{{- end -}}
{{- toJson $doc -}}
{{- end -}}

{{/*
router_only rules the schema cannot judge alone and the filter refuses
(filterspec/routeronly.go, compile; kvhints/routeronly.go, checkPath):
kv_hints as a member path's first name, a header the HTTP framing or the
filter depends on, a header listed twice in different case (the filter
lowers them), and more fields than the filter takes once the engines'
presets are expanded and duplicates merged. files/router-only.json holds
the presets, the framing headers and the limit (the chart test keeps it
equal to filterspec).
*/}}
{{- define "kvgate.checkRouterOnly" -}}
{{- $ro := get .Values.filter "router_only" | default dict -}}
{{- $spec := .Files.Get "files/router-only.json" | fromJson -}}
{{- $members := list -}}{{- $headers := list -}}
{{- range include "kvgate.routerOnlyEngines" . | fromJsonArray -}}
{{- with get $spec.engines . -}}
{{- $members = concat $members .members -}}
{{- $headers = concat $headers .headers -}}
{{- end -}}
{{- end -}}
{{- range $i, $m := get $ro "members" | default list -}}
{{- if eq (first (splitList "." $m)) "kv_hints" -}}
{{- fail (printf "filter.router_only.members[%d] %q: kv_hints has rules of its own and is not a router-only field" $i $m) -}}
{{- end -}}
{{- $members = append $members $m -}}
{{- end -}}
{{- $lower := dict -}}
{{- range $i, $h := get $ro "headers" | default list -}}
{{- if has (lower $h) $spec.framing_headers -}}
{{- fail (printf "filter.router_only.headers[%d] %q: the HTTP framing and the filter depend on it" $i $h) -}}
{{- end -}}
{{- if hasKey $lower (lower $h) -}}
{{- fail (printf "filter.router_only.headers[%d] %q: listed twice (header names are matched without regard to case)" $i $h) -}}
{{- end -}}
{{- $_ := set $lower (lower $h) true -}}
{{- $headers = append $headers (lower $h) -}}
{{- end -}}
{{- $n := add (len ($members | uniq)) (len ($headers | uniq)) | int -}}
{{- if gt $n (int $spec.max_fields) -}}
{{- fail (printf "filter.router_only: %d fields, more than %d (the engines' presets expanded, duplicates merged)" $n (int $spec.max_fields)) -}}
{{- end -}}
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
Values the schema cannot judge alone and kvgate-sidecar refuses at start-up
(its -check-config says the same; the chart test runs one list of values
through both): the API and admin ports must differ (and, in sidecar mode,
differ from the worker's port), a source_cidr must be a prefix whose
host bits are clear, not IPv4-mapped (filterspec/senders.go, parseCIDR),
and router_only must fit the filter (kvgate.checkRouterOnly).
*/}}
{{- define "kvgate.checkValues" -}}
{{- if ne .Values.mode "istio" -}}
{{- $api := int .Values.ports.api -}}{{- $admin := int .Values.ports.admin -}}
{{- if eq $api $admin -}}
{{- fail (printf "ports.admin %d: the same port as ports.api; give the admin endpoints (/metrics, probes) a port of their own" $admin) -}}
{{- end -}}
{{- if and (eq .Values.mode "sidecar") .Values.worker.image (or (eq (int .Values.worker.port) $api) (eq (int .Values.worker.port) $admin)) -}}
{{- fail (printf "worker.port %d: kvgate listens there (ports.api %d, ports.admin %d); the worker needs a port of its own" (int .Values.worker.port) $api $admin) -}}
{{- end -}}
{{- end -}}
{{- range $i, $r := .Values.filter.trusted_senders -}}
{{- with get $r "source_cidr" -}}
{{- include "kvgate.checkCIDR" (dict "cidr" . "where" (printf "filter.trusted_senders[%d].source_cidr %q" $i .)) -}}
{{- end -}}
{{- end -}}
{{- include "kvgate.checkRouterOnly" . -}}
{{- end -}}

{{- define "kvgate.checkCIDR" -}}
{{- $parts := splitList "/" .cidr -}}
{{- $addr := index $parts 0 -}}
{{- $bits := atoi (index $parts 1) -}}
{{- if contains "." $addr -}}
{{- $n := 0 -}}
{{- range splitList "." $addr }}{{ $n = add (mul $n 256) (atoi .) }}{{ end -}}
{{- $block := 1 -}}
{{- range until (sub 32 $bits | int) }}{{ $block = mul $block 2 }}{{ end -}}
{{- if ne (mod $n $block | int) 0 -}}
{{- fail (printf "%s: host bits are set (the prefix is %s of the address); kvgate-sidecar refuses it" .where (printf "/%d" $bits)) -}}
{{- end -}}
{{- else -}}
{{- $groups := list -}}
{{- $halves := splitList "::" $addr -}}
{{- if gt (len $halves) 2 -}}{{- fail (printf "%s: not an IPv6 address (\"::\" twice)" .where) -}}{{- end -}}
{{- $left := list -}}{{- $right := list -}}
{{- if index $halves 0 }}{{ $left = splitList ":" (index $halves 0) }}{{ end -}}
{{- if and (eq (len $halves) 2) (index $halves 1) }}{{ $right = splitList ":" (index $halves 1) }}{{ end -}}
{{- $missing := sub 8 (add (len $left) (len $right)) | int -}}
{{- if or (and (eq (len $halves) 1) (ne $missing 0)) (and (eq (len $halves) 2) (lt $missing 1)) -}}
{{- fail (printf "%s: not an IPv6 address (it needs 8 groups, or \"::\" for at least one)" .where) -}}
{{- end -}}
{{- $groups = $left -}}
{{- range until $missing }}{{ $groups = append $groups "0" }}{{ end -}}
{{- range $right }}{{ $groups = append $groups . }}{{ end -}}
{{- $hex := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 -}}
{{- $vals := list -}}
{{- range $groups -}}
{{- if not (regexMatch "^[0-9a-fA-F]{1,4}$" .) -}}{{- fail (printf "%s: not an IPv6 address (group %q)" $.where .) -}}{{- end -}}
{{- $v := 0 -}}
{{- range splitList "" (lower .) }}{{ $v = add (mul $v 16) (get $hex .) }}{{ end -}}
{{- $vals = append $vals $v -}}
{{- end -}}
{{- if and (eq (index $vals 5 | int) 65535) (eq (add (index $vals 0) (index $vals 1) (index $vals 2) (index $vals 3) (index $vals 4) | int) 0) -}}
{{- fail (printf "%s: an IPv4-mapped IPv6 prefix never matches (source addresses are compared in IPv4 form); write the IPv4 prefix" .where) -}}
{{- end -}}
{{- range $g, $v := $vals -}}
{{- $from := mul $g 16 | int -}}
{{- if ge $from $bits -}}
{{- if ne (int $v) 0 -}}{{- fail (printf "%s: host bits are set; kvgate-sidecar refuses it" $.where) -}}{{- end -}}
{{- else if lt $bits (add $from 16 | int) -}}
{{- $block := 1 -}}
{{- range until (sub (add $from 16) $bits | int) }}{{ $block = mul $block 2 }}{{ end -}}
{{- if ne (mod $v $block | int) 0 -}}{{- fail (printf "%s: host bits are set; kvgate-sidecar refuses it" $.where) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}


{{/* kvgate's arguments: the Deployment's container, and the Helm test's -check-config. */}}
{{- define "kvgate.args" -}}
# ":port" listens on every address, IPv4 and IPv6.
- -listen
- {{ printf ":%d" (int .Values.ports.api) | quote }}
- -admin
- {{ printf ":%d" (int .Values.ports.admin) | quote }}
- -upstream
{{- if and (eq .Values.mode "sidecar") .Values.worker.image }}
- {{ printf "http://127.0.0.1:%d" (int .Values.worker.port) | quote }}
{{- else if eq .Values.mode "sidecar" }}
- echo
{{- else }}
- {{ .Values.upstream.url | quote }}
{{- end }}
- -filter-config
- "@/etc/kvgate/filter/filter.json"
- -pool-size
- {{ .Values.poolSize | quote }}
- -cache-dir
- /var/cache/kvgate
- -drain-timeout
- {{ printf "%ds" (int .Values.shutdown.drainSeconds) | quote }}
{{- if .Values.tls.enabled }}
- -tls-cert
- /etc/kvgate/tls/tls.crt
- -tls-key
- /etc/kvgate/tls/tls.key
{{- if .Values.tls.clientCA.secretName }}
- -client-ca
- {{ printf "/etc/kvgate/client-ca/%s" .Values.tls.clientCA.key | quote }}
{{- end }}
{{- end }}
{{- end -}}
