{{/* Names and labels follow the upstream LeaderWorkerSet chart for the same release
name and values, so `helm upgrade` of an upstream release to this chart keeps its
objects (a Deployment's selector cannot change) and back. Objects the manager finds
by a fixed name (the webhook Service and Secret, the webhook configurations, the
cert-manager objects) keep the fixed `lws-` names upstream's chart gives them; the
rest take the release's full name. */}}

{{/* The chart name, or nameOverride. */}}
{{- define "lws.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* fullnameOverride; else the release name when it already holds the name (release
"lws" gives "lws"); else "<release>-<name>". At most 63 characters (a DNS label). */}}
{{- define "lws.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The manager's pods: the Deployment's selector, its pod labels, and what the
Services and the ServiceMonitor select. Exactly upstream's, for the upgrade. */}}
{{- define "lws.selectorLabels" -}}
control-plane: controller-manager
app.kubernetes.io/name: {{ include "lws.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "lws.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "lws.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The manager's image. The committed chart has no repository (values.yaml says why):
the install stops here, with what to do, instead of ending in ImagePullBackOff. */}}
{{- define "lws.image" -}}
{{- $repository := .Values.image.manager.repository -}}
{{- if not $repository -}}
{{- fail (printf "image.manager.repository is empty: this chart names no image until a release fills one in. Build the image and the chart, push both, and install the chart from your registry: `make release REGISTRY=<registry>`, then `skopeo copy --all oci-archive:dist/release/%s/lws-%s.oci.tar docker://<registry>/lws:%s` and `helm push dist/release/%s/lws-%s.tgz oci://<registry>/charts` (docs/operations.md, \"Publishing a release\"); or set image.manager.repository (and .tag) to an image you have pushed" .Chart.Version .Chart.Version .Chart.Version .Chart.Version .Chart.Version) -}}
{{- end -}}
{{ $repository }}:{{ .Values.image.manager.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The names upstream's manager uses by default and upstream's chart writes as
fixed names: the manager reads no name from the chart but these. */}}
{{- define "lws.webhookServiceName" -}}lws-webhook-service{{- end -}}
{{- define "lws.webhookSecretName" -}}lws-webhook-server-cert{{- end -}}
{{- define "lws.metricsSecretName" -}}lws-metrics-server-cert{{- end -}}
{{- define "lws.metricsServiceName" -}}{{ include "lws.fullname" . }}-controller-manager-metrics-service{{- end -}}

{{/* The port the manager serves its webhooks on: service.port, as in upstream's chart
(the container port webhook-server), unless managerConfig sets webhook.port, which
the manager reads last. The metrics (8443) and health (8081) ports are taken; below
1024 the manager, not root and without capabilities, may not listen (this chart's
service.port used to be the webhook Service's, 443: a values file that kept it must
drop it). */}}
{{- define "lws.webhookPort" -}}
{{- $port := int (dig "webhook" "port" .Values.service.port (.Values.managerConfig | default dict)) -}}
{{- if or (eq $port 8443) (eq $port 8081) -}}
{{- fail (printf "service.port %d is the manager's metrics or health port; the webhook server needs another (upstream's default: 9443)" $port) -}}
{{- end -}}
{{- $added := dig "capabilities" "add" (list) (.Values.securityContext | default dict) -}}
{{- if and (lt $port 1024) (not (has "NET_BIND_SERVICE" $added)) -}}
{{- fail (printf "service.port %d: the webhook server's port, as in upstream's chart (default 9443), no longer the webhook Service's (always 443); below 1024 it needs securityContext.capabilities.add [NET_BIND_SERVICE]" $port) -}}
{{- end -}}
{{- $port -}}
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
{{- with .Values.featureGates }}
{{- $_ := set $config "featureGates" (deepCopy .) }}
{{- end }}
{{- /* Written only when it is not the manager's default, 9443. */}}
{{- if ne (int .Values.service.port) 9443 }}
{{- $_ := set $config "webhook" (dict "port" (int .Values.service.port)) }}
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
    name: {{ include "lws.webhookServiceName" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
{{- end -}}
