package main

// Rendering upstream's object templates: Go text/template with Index, Count and the op's templateParams, and the
// arithmetic functions scheduler_perf registers (operations.go getTemplateFuncs), then YAML into the object.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"text/template"

	"sigs.k8s.io/yaml"
)

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	return 0
}

var templateFuncs = template.FuncMap{
	"AddFloat":      func(a, b any) float64 { return toFloat(a) + toFloat(b) },
	"SubtractFloat": func(a, b any) float64 { return toFloat(a) - toFloat(b) },
	"MultiplyFloat": func(a, b any) float64 { return toFloat(a) * toFloat(b) },
	"DivideFloat":   func(a, b any) float64 { return toFloat(a) / toFloat(b) },
	"AddInt":        func(a, b any) int { return int(toFloat(a)) + int(toFloat(b)) },
	"SubtractInt":   func(a, b any) int { return int(toFloat(a)) - int(toFloat(b)) },
	"MultiplyInt":   func(a, b any) int { return int(toFloat(a)) * int(toFloat(b)) },
	"DivideInt":     func(a, b any) int { return int(toFloat(a)) / int(toFloat(b)) },
	"Mod":           func(a, b any) int { return int(toFloat(a)) % int(toFloat(b)) },
	"Int":           func(a any) int { return int(math.Floor(toFloat(a))) },
	"JSON": func(a any) (string, error) {
		b, err := json.Marshal(a)
		return string(b), err
	},
}

// templates caches parsed template files; pods and nodes render on several goroutines.
var (
	templatesMu sync.Mutex
	templates   = map[string]*template.Template{}
)

func parsed(path string) (*template.Template, error) {
	templatesMu.Lock()
	defer templatesMu.Unlock()
	if t, ok := templates[path]; ok {
		return t, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := template.New(path).Funcs(templateFuncs).Option("missingkey=zero").Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	templates[path] = t
	return t, nil
}

// render executes the template file at path with Index, Count and params and decodes the YAML into out (strictly,
// as upstream: an unknown field is an error).
func render(path string, index, count int, params map[string]any, out any) error {
	t, err := parsed(path)
	if err != nil {
		return err
	}
	env := map[string]any{}
	for k, v := range params {
		env[k] = v
	}
	env["Index"], env["Count"] = index, count
	var buf bytes.Buffer
	if err := t.Execute(&buf, env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(buf.Bytes(), out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
