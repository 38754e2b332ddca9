{{- define "capo.labels" -}}
app.kubernetes.io/name: capo
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- /* The image: global.imageRegistry, when set, takes the place of the
     repository's registry (its first part, when that names a host: a dot, a
     port or localhost), as a mirror holds the same path; image.digest pins
     it. */}}
{{- define "capo.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $registry := trimSuffix "/" ((.Values.global | default dict).imageRegistry | default "") -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repo -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repo = join "/" (rest $parts) -}}
{{- end -}}
{{- $repo = printf "%s/%s" $registry $repo -}}
{{- end -}}
{{ $repo }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{- define "capo.datastoreEnv" -}}
- name: DATASTORE_TYPE
  value: {{ .Values.datastore.type | quote }}
{{- if eq .Values.datastore.type "etcdv3" }}
- name: ETCD_ENDPOINTS
  value: {{ required "datastore.etcdEndpoints is required with datastore.type etcdv3" .Values.datastore.etcdEndpoints | quote }}
{{- if .Values.datastore.etcdTLSSecret }}
- name: ETCD_CA_CERT_FILE
  value: /calico-secrets/etcd-ca
- name: ETCD_CERT_FILE
  value: /calico-secrets/etcd-cert
- name: ETCD_KEY_FILE
  value: /calico-secrets/etcd-key
{{- end }}
{{- else if ne .Values.datastore.type "kubernetes" }}
{{- fail "datastore.type must be kubernetes or etcdv3" }}
{{- end }}
{{- with .Values.datastore.calicoAPIGroup }}
{{- if not (has . (list "projectcalico.org/v3" "crd.projectcalico.org/v1")) }}
{{- fail "datastore.calicoAPIGroup must be projectcalico.org/v3, crd.projectcalico.org/v1 or empty (decide as Calico does)" }}
{{- end }}
- name: CALICO_API_GROUP
  value: {{ . | quote }}
{{- end }}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
{{- end }}

{{- define "capo.etcdVolume" -}}
{{- if and (eq .Values.datastore.type "etcdv3") .Values.datastore.etcdTLSSecret }}
- name: etcd-certs
  secret:
    secretName: {{ .Values.datastore.etcdTLSSecret }}
    defaultMode: 0400
{{- end }}
{{- end }}

{{- define "capo.etcdMount" -}}
{{- if and (eq .Values.datastore.type "etcdv3") .Values.datastore.etcdTLSSecret }}
- name: etcd-certs
  mountPath: /calico-secrets
  readOnly: true
{{- end }}
{{- end }}

{{/* The container's memory limit, from which the daemon sets Go's (daemon.LimitMemory). */}}
{{- define "capo.memoryLimitEnv" -}}
- name: CAPO_MEMORY_LIMIT
  valueFrom: {resourceFieldRef: {resource: limits.memory}}
{{- end }}

{{- /* capo.seconds is a Go duration (40m, 1h30m, 0) in seconds, as a float:
     the chart compares the config's durations before capo has to refuse
     them. */}}
{{- define "capo.seconds" -}}
{{- $units := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "ms" 1e-3 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $n := regexFind "^[0-9.]+" . -}}
{{- $total = addf $total (mulf (float64 $n) (get $units (trimPrefix $n .))) -}}
{{- end -}}
{{- $total -}}
{{- end }}
