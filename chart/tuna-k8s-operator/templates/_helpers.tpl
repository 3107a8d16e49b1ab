{{/*
Names and labels.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "tuna.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every resource name. Cut to 43 characters: the longest suffix
("-controller-metrics", 19) must still fit the 63 characters of a Service name.
*/}}
{{- define "tuna.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 43 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 43 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 43 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tuna.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object of the release. */}}
{{- define "tuna.labels" -}}
helm.sh/chart: {{ include "tuna.chart" . }}
app.kubernetes.io/name: {{ include "tuna.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tuna-k8s-operator
{{- end }}

{{/*
Labels of one component's objects: tuna.labels plus
app.kubernetes.io/component. Call with (dict "ctx" $ "component" "controller").
Every object that belongs to one component carries it, so a component's
ServiceAccount, RBAC, Deployment and metrics Service can be picked by label.
*/}}
{{- define "tuna.componentLabels" -}}
{{ include "tuna.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Selector labels of one component's pods. Same argument as tuna.componentLabels. */}}
{{- define "tuna.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tuna.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* "<fullname>-<component>": the ServiceAccount, ClusterRole, Role and Deployment of a component. Same argument as tuna.componentLabels. */}}
{{- define "tuna.componentName" -}}
{{- printf "%s-%s" (include "tuna.fullname" .ctx) .component }}
{{- end }}

{{/* The chart-made ConfigMap of edge.apiCABundle, and where it is mounted. */}}
{{- define "tuna.edgeCAName" -}}
{{- printf "%s-edge-ca" (include "tuna.fullname" .) }}
{{- end }}
{{- define "tuna.edgeCADir" -}}/etc/tuna/edge-ca{{- end }}

{{/* Where the controller mounts the Secret of its API key (file api-key). */}}
{{- define "tuna.apiKeyDir" -}}/var/run/tuna/api-key{{- end }}

{{/* The chart-made Secret of credentials.apiKey. */}}
{{- define "tuna.apiKeySecretName" -}}
{{- printf "%s-api-key" (include "tuna.fullname" .) }}
{{- end }}

{{- define "tuna.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Checks of the values that the schema cannot express; fails with a message
that names the values to set.
*/}}
{{- define "tuna.validate" -}}
{{- if not .Values.edge.apiURL }}
{{- fail "edge.apiURL is required: set it to the URL of the edge's control API, e.g. --set edge.apiURL=https://edge.example.com:8443" }}
{{- end }}
{{- if and (hasPrefix "http://" .Values.edge.apiURL) (or .Values.edge.apiFingerprint .Values.edge.apiCABundle) }}
{{- fail "edge.apiFingerprint and edge.apiCABundle verify TLS, but edge.apiURL is plain http://: use the edge's https:// API URL" }}
{{- end }}
{{- if and .Values.ingressClass.default (not .Values.ingressClass.enabled) }}
{{- fail "ingressClass.default=true needs ingressClass.enabled=true: the chart can only mark the IngressClass it creates as the default" }}
{{- end }}
{{- $seen := dict }}
{{- range $i, $e := .Values.extraEnv }}
{{- if not $e.name }}
{{- fail (printf "extraEnv[%d] has no name" $i) }}
{{- end }}
{{- if eq $e.name "POD_NAMESPACE" }}
{{- fail "extraEnv must not set POD_NAMESPACE: the chart sets it from the Downward API (the operator's namespace)" }}
{{- end }}
{{- if hasKey $seen $e.name }}
{{- fail (printf "extraEnv sets %s twice: keep one entry" $e.name) }}
{{- end }}
{{- $_ := set $seen $e.name true }}
{{- end }}
{{- $_ := include "tuna.credentialsSource" . }}
{{- end }}

{{/*
The source of the operator's API key: "apiKey", "existingSecret" or
"extraEnv". Fails unless exactly one source is set.
*/}}
{{- define "tuna.credentialsSource" -}}
{{- $sources := list }}
{{- if .Values.credentials.apiKey }}
{{- $sources = append $sources "credentials.apiKey" }}
{{- end }}
{{- if .Values.credentials.existingSecret }}
{{- $sources = append $sources "credentials.existingSecret" }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if eq .name "TUNA_API_KEY" }}
{{- $sources = append $sources "extraEnv (TUNA_API_KEY)" }}
{{- end }}
{{- end }}
{{- if eq (len $sources) 0 }}
{{- fail "the operator's API key is not set: set exactly one of credentials.apiKey (the chart makes a Secret), credentials.existingSecret (your Secret with the key api-key) or extraEnv with TUNA_API_KEY (from a secret injector)" }}
{{- end }}
{{- if gt (len $sources) 1 }}
{{- fail (printf "the operator's API key has %d sources (%s): set exactly one of credentials.apiKey, credentials.existingSecret or extraEnv with TUNA_API_KEY, and leave the others empty" (len $sources) (join ", " $sources)) }}
{{- end }}
{{- $s := first $sources }}
{{- if eq $s "credentials.apiKey" }}apiKey{{ else if eq $s "credentials.existingSecret" }}existingSecret{{ else }}extraEnv{{ end }}
{{- end }}

{{/*
Security contexts: restricted Pod Security Standard, non-root user 65532
(distroless "nonroot"), read-only root filesystem, no capabilities.
*/}}
{{- define "tuna.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tuna.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Flags both components take. */}}
{{- define "tuna.commonArgs" -}}
- --metrics-bind-address=:8080
- --health-probe-bind-address=:8081
{{- if .Values.agentManager.allowExternalUpstreams }}
- --allow-external-upstreams
{{- end }}
{{- with .Values.watchNamespaces }}
- --watch-namespaces={{ join "," . }}
{{- end }}
{{- end }}

{{/* Ports, probes and the Downward API namespace both containers have. */}}
{{- define "tuna.ports" -}}
- name: metrics
  containerPort: 8080
  protocol: TCP
- name: health
  containerPort: 8081
  protocol: TCP
{{- end }}

{{- define "tuna.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  initialDelaySeconds: 5
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: health
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
{{- end }}

{{/* Scheduling and pull secrets of both pods. */}}
{{- define "tuna.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The namespaced rules of each component: in the ClusterRole when
watchNamespaces is empty, else in a Role of each listed namespace.
*/}}
{{- define "tuna.controllerNamespacedRules" -}}
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels", "domains", "tcpendpoints", "secretsyncs", "accesspolicies"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels/status", "domains/status", "tcpendpoints/status", "secretsyncs/status", "accesspolicies/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels/finalizers", "domains/finalizers", "tcpendpoints/finalizers", "secretsyncs/finalizers", "accesspolicies/finalizers"]
  verbs: ["update"]
{{- if not .Values.secretSync.enabled }}
# AccessPolicy: the Secrets a policy names (an OIDC client secret, an
# htpasswd file, a links key) are read with get, by name, in the policy's
# namespace, and sent to the edge over its API; so are the certificates a
# Gateway listener's tls.certificateRefs name. No list or watch.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- if .Values.secretSync.enabled }}
# SecretSync: the target Secret is written with server-side apply (create,
# patch) and deleted with its SecretSync; get reads the target's metadata
# (is it ours?) and the Secret named by spec.apiKeySecretRef, and the
# Secrets an AccessPolicy names. No list or watch: the controller never
# enumerates Secrets. (patch alone already returns a Secret's content, so
# get adds no power to it.)
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "delete"]
{{- end }}
{{- if .Values.loadBalancer.enabled }}
# LoadBalancer Services (loadBalancer.enabled): the controller watches
# Services (its cache keeps type LoadBalancer only; get reads one whose
# type changed away), patches their cleanup finalizer and
# status.loadBalancer, never their spec. Each port becomes a Tunnel and a
# TCPEndpoint owned by the Service (create, delete); owner references that
# block the Service's deletion need update on services/finalizers.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["services/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["services/finalizers"]
  verbs: ["update"]
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels", "tcpendpoints"]
  verbs: ["create", "delete"]
{{- end }}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch"]
# Gateway API (used only when its CRDs are installed): Gateways and
# HTTPRoutes are read and get status; ReferenceGrants are read. Never
# their spec.
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways", "httproutes", "tcproutes", "referencegrants"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways/status", "httproutes/status", "tcproutes/status"]
  verbs: ["get", "update", "patch"]
# A TCPRoute is served by a tcp Tunnel the Gateway owns (blocking its
# deletion needs update on gateways/finalizers).
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways/finalizers"]
  verbs: ["update"]
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels"]
  verbs: ["create", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{- define "tuna.agentNamespacedRules" -}}
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels"]
  verbs: ["get", "list", "watch"]
# get only: the AccessPolicy of a tcp Tunnel, whose Ready says when the
# edge refuses its connections (a policy a TCP address cannot take).
- apiGroups: ["k8s.tuna.am"]
  resources: ["accesspolicies"]
  verbs: ["get"]
- apiGroups: ["k8s.tuna.am"]
  resources: ["tunnels/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses/status"]
  verbs: ["get", "patch", "update"]
# Gateway API (when installed): the agent serves HTTPRoutes of the
# operator's Gateways, verifying https backends by their
# BackendTLSPolicies; it reads them and never writes them.
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways", "httproutes", "referencegrants", "backendtlspolicies"]
  verbs: ["get", "list", "watch"]
# get only (R21): upstream Services, key Secrets and users' apiKeySecretRef
# Secrets, and the CA bundles of https upstreams (spec.upstream.tls.caRef,
# the annotation k8s.tuna.am/upstream-ca), which may be ConfigMaps.
- apiGroups: [""]
  resources: ["services", "secrets", "configmaps"]
  verbs: ["get"]
# A headless Service (no ClusterIP) is dialed at one of its ready
# endpoints: its EndpointSlices are listed, and watched (metadata only) so
# that a change picks another at once.
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["list", "watch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The agent replicas' heartbeat Leases, in the release namespace: each keeps
its own and reads the others' (get only: no list or watch).
*/}}
{{- define "tuna.agentLeaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update", "delete"]
{{- end }}

{{/*
The RoleBinding, in one namespace, of the component's Role of the same
name to its ServiceAccount, starting with "---". Call with
(dict "c" $c "namespace" $ns), $c as for tuna.componentLabels.
*/}}
{{- define "tuna.roleBinding" -}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "tuna.componentName" .c }}
  namespace: {{ .namespace }}
  labels:
    {{- include "tuna.componentLabels" .c | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "tuna.componentName" .c }}
subjects:
  - kind: ServiceAccount
    name: {{ include "tuna.componentName" .c }}
    namespace: {{ .c.ctx.Release.Namespace }}
{{- end }}
