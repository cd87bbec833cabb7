{{/*
Labels of every object: the scheduler's name only, so the chart renders what deploy/manifests holds.
*/}}
{{- define "kube-wasm-scheduler.labels" -}}
app.kubernetes.io/name: {{ .Values.scheduler.name }}
{{- end }}

{{/*
The profile's plugins: native plugins.enabled/disabled and the Wasm plugins without extensionPoints at
multiPoint; each Wasm plugin with extensionPoints enabled at exactly those points.
*/}}
{{- define "kube-wasm-scheduler.plugins" -}}
{{- $enabled := list -}}
{{- range .Values.plugins.enabled -}}
{{- $enabled = append $enabled (dict "name" .) -}}
{{- end -}}
{{- $points := dict -}}
{{- range .Values.wasm.plugins -}}
{{- $ref := dict "name" .name -}}
{{- if hasKey . "weight" -}}
{{- $_ := set $ref "weight" .weight -}}
{{- end -}}
{{- if .extensionPoints -}}
{{- range $point := .extensionPoints -}}
{{- $at := list -}}
{{- if hasKey $points $point -}}
{{- $at = get $points $point -}}
{{- end -}}
{{- $_ := set $points $point (append $at $ref) -}}
{{- end -}}
{{- else -}}
{{- $enabled = append $enabled $ref -}}
{{- end -}}
{{- end -}}
{{- $disabled := list -}}
{{- range .Values.plugins.disabled -}}
{{- $disabled = append $disabled (dict "name" .) -}}
{{- end -}}
{{- $plugins := dict -}}
{{- $multiPoint := dict -}}
{{- if $enabled -}}
{{- $_ := set $multiPoint "enabled" $enabled -}}
{{- end -}}
{{- if $disabled -}}
{{- $_ := set $multiPoint "disabled" $disabled -}}
{{- end -}}
{{- if $multiPoint -}}
{{- $_ := set $plugins "multiPoint" $multiPoint -}}
{{- end -}}
{{- range $point, $refs := $points -}}
{{- $_ := set $plugins $point (dict "enabled" $refs) -}}
{{- end -}}
{{- toYaml $plugins -}}
{{- end }}

{{/*
pluginConfig: the native plugins' args, then one entry per Wasm plugin naming its component and limits.
*/}}
{{- define "kube-wasm-scheduler.pluginConfig" -}}
{{- $entries := list -}}
{{- range .Values.pluginConfig -}}
{{- $entries = append $entries . -}}
{{- end -}}
{{- $wasm := .Values.wasm -}}
{{- range $wasm.plugins -}}
{{- $args := dict "component" .component -}}
{{- with .sha256 -}}
{{- $_ := set $args "sha256" . -}}
{{- end -}}
{{- with .config -}}
{{- $_ := set $args "config" . -}}
{{- end -}}
{{- $_ := set $args "timeout" (.timeout | default $wasm.timeout) -}}
{{- $_ := set $args "memoryLimit" (.memoryLimit | default $wasm.memoryLimit) -}}
{{- $_ := set $args "failurePolicy" (.failurePolicy | default $wasm.failurePolicy) -}}
{{- $entries = append $entries (dict "name" .name "args" $args) -}}
{{- end -}}
{{- toYaml $entries -}}
{{- end }}
