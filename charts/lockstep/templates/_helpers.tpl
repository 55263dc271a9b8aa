{{/* The prefix of every object's name: the release name, with "lockstep" when it lacks it. */}}
{{- define "lockstep.fullname" -}}
{{- if contains "lockstep" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-lockstep" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lockstep.labels" -}}
app.kubernetes.io/name: lockstep
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "lockstep.tag" . | quote }}
app.kubernetes.io/part-of: lockstep
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The controller pods' selector: the same labels as config/manager's, which the webhook Service selects. */}}
{{- define "lockstep.selector" -}}
app.kubernetes.io/name: lockstep
app.kubernetes.io/component: controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image tag: image.tag, else the chart's appVersion; a moving "latest" is refused. */}}
{{- define "lockstep.tag" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if or (eq $tag "latest") (hasSuffix ":latest" (.Values.engine.image | default "")) -}}
{{- fail "image.tag and engine.image must pin a version or a digest, not latest: an engine must run the code that judged its spec" -}}
{{- end -}}
{{- $tag -}}
{{- end -}}

{{- define "lockstep.image" -}}
{{- $tag := include "lockstep.tag" . -}}
{{- if hasPrefix "sha256:" $tag -}}
{{- printf "%s@%s" .Values.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "lockstep.serviceAccountName" -}}
{{- printf "%s-controller" (include "lockstep.fullname" .) -}}
{{- end -}}

{{- define "lockstep.webhookService" -}}
{{- printf "%s-webhook-service" (include "lockstep.fullname" .) -}}
{{- end -}}

{{- define "lockstep.certSecret" -}}
{{- printf "%s-webhook-server-cert" (include "lockstep.fullname" .) -}}
{{- end -}}
