package toolrunner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// decodeArgs checks raw against a tool's JSON schema (the subset Herald's
// tools use: an object of typed properties, some required) and decodes it
// into dst. Its errors name the field and show the expected shape, so the
// model can correct the call.
func decodeArgs(tool string, schema map[string]any, raw string, dst any) error {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	var args map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil || args == nil {
		return argError(tool, schema, "the arguments are not a JSON object")
	}
	if err := checkArgs(schema, args); err != nil {
		return argError(tool, schema, err.Error())
	}
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), dst); err != nil {
		return argError(tool, schema, err.Error())
	}
	return nil
}

func argError(tool string, schema map[string]any, why string) error {
	return &toolError{status: statusError, correctable: true,
		msg: fmt.Sprintf("%s for %s: %s. Expected arguments: %s", ErrInvalidArguments, tool, why, describeSchema(schema))}
}

func checkArgs(schema map[string]any, args map[string]any) error {
	props, _ := schema["properties"].(map[string]any)
	for _, name := range requiredOf(schema) {
		if v, ok := args[name]; !ok || v == nil {
			return fmt.Errorf("field %q is required", name)
		}
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prop, known := props[name].(map[string]any)
		if !known {
			if schema["additionalProperties"] == false {
				return fmt.Errorf("field %q is not an argument of this tool", name)
			}
			continue
		}
		if err := checkValue(name, prop, args[name]); err != nil {
			return err
		}
	}
	return nil
}

func checkValue(name string, prop map[string]any, v any) error {
	want, _ := prop["type"].(string)
	if v == nil || want == "" || typeMatches(want, v) {
		return checkEnum(name, prop, v)
	}
	return fmt.Errorf("field %q must be %s, got %s", name, article(want), jsonKind(v))
}

func checkEnum(name string, prop map[string]any, v any) error {
	enum := enumOf(prop)
	if len(enum) == 0 || v == nil {
		return nil
	}
	for _, e := range enum {
		if fmt.Sprint(v) == e {
			return nil
		}
	}
	return fmt.Errorf("field %q must be one of %s, got %v", name, strings.Join(enum, ", "), v)
}

func typeMatches(want string, v any) bool {
	switch want {
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f)
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return true
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func article(t string) string {
	if strings.IndexByte("aeiou", t[0]) >= 0 {
		return "an " + t
	}
	return "a " + t
}

// describeSchema renders a schema compactly: {"path": string (required), ...}.
func describeSchema(schema map[string]any) string {
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	for _, r := range requiredOf(schema) {
		required[r] = true
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("{")
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		prop, _ := props[name].(map[string]any)
		t, _ := prop["type"].(string)
		if t == "" {
			t = "any"
		}
		fmt.Fprintf(&b, "%q: %s", name, t)
		if enum := enumOf(prop); len(enum) > 0 {
			fmt.Fprintf(&b, " (one of %s)", strings.Join(enum, "|"))
		}
		if required[name] {
			b.WriteString(" (required)")
		}
	}
	b.WriteString("}")
	return b.String()
}

func requiredOf(schema map[string]any) []string {
	switch r := schema["required"].(type) {
	case []string:
		return r
	case []any:
		out := make([]string, 0, len(r))
		for _, v := range r {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func enumOf(prop map[string]any) []string {
	switch e := prop["enum"].(type) {
	case []string:
		return e
	case []any:
		out := make([]string, 0, len(e))
		for _, v := range e {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	return nil
}
