{{/* Labels on every object. Selectors use only control-plane: controller-manager,
as the kustomize manifests do: a Deployment's selector cannot change, and the
Services must find the pods of either install. */}}
{{- define "lws.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
control-plane: controller-manager
{{- end -}}

{{- define "lws.image" -}}
{{ .Values.image.manager.repository }}:{{ .Values.image.manager.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The manager's Configuration: our defaults, then the chart switches, then
managerConfig on top, merged key by key. */}}
{{- define "lws.managerConfig" -}}
{{- $config := dict
  "apiVersion" "config.lws.x-k8s.io/v1alpha1"
  "kind" "Configuration"
  "leaderElection" (dict "leaderElect" true)
  "internalCertManagement" (dict "enable" (not .Values.enableCertManager))
-}}
{{- with .Values.gangSchedulingManagement }}
{{- $_ := set $config "gangSchedulingManagement" (deepCopy .) }}
{{- end }}
{{- $config = mustMergeOverwrite $config (deepCopy (.Values.managerConfig | default dict)) -}}
{{- toYaml $config -}}
{{- end -}}

{{- define "lws.webhookAnnotations" -}}
{{- if .Values.enableCertManager -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/lws-serving-cert
{{- end }}
{{- end -}}

{{- define "lws.webhookClientConfig" -}}
clientConfig:
  service:
    name: lws-webhook-service
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: {{ .root.Values.service.port }}
{{- end -}}
