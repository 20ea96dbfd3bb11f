{{/* The operator's name inside the release: <release>-prometheus-operator, at most 63 characters. */}}
{{- define "prometheus-operator.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Cluster-wide objects carry the namespace too: one release per namespace may share a name. */}}
{{- define "prometheus-operator.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "prometheus-operator.fullname" .) | trunc 253 -}}
{{- end -}}

{{- define "prometheus-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "prometheus-operator.labels" -}}
{{ include "prometheus-operator.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: prometheus-operator
{{- end -}}

{{- define "prometheus-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
