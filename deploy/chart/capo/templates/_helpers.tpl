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
