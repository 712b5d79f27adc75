package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// UnknownKey is a key of herald.yaml no setting has: it is ignored, which
// is almost always a typo (`modle:`, `agent: {max_turn: 5}`).
type UnknownKey struct {
	// Path is the dotted key, e.g. agent.max_turn; map entries keep their
	// own names (mcp_servers.files.comand).
	Path string
	Line int
	// Suggest is the nearest known key at the same place, if one is close.
	Suggest string
}

func (u UnknownKey) String() string {
	s := fmt.Sprintf("%s (line %d)", u.Path, u.Line)
	if u.Suggest != "" {
		s += fmt.Sprintf(": did you mean %s?", u.Suggest)
	}
	return s
}

// UnknownKeys lists the keys of the YAML document data that no setting
// reads. The known keys are the yaml tags of Config's fields (and Hermes'
// `model:`), so a setting added to Config is known as soon as it exists.
func UnknownKeys(data []byte) ([]UnknownKey, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var out []UnknownKey
	if len(doc.Content) > 0 {
		walkKnown(doc.Content[0], reflect.TypeOf(file{}), "", &out)
	}
	return out, nil
}

// walkKnown compares node with what type t reads.
func walkKnown(n *yaml.Node, t reflect.Type, path string, out *[]UnknownKey) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: its mapping's keys are this one's
				walkKnown(v, t, path, out)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				*out = append(*out, UnknownKey{Path: join(path, k.Value), Line: k.Line, Suggest: nearest(k.Value, fields, path)})
				continue
			}
			walkKnown(v, ft, join(path, k.Value), out)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkKnown(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), out)
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.SequenceNode:
		// a list of one setting's entries (pricing.<model>: dated prices)
		for i, item := range n.Content {
			walkKnown(item, t, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			walkKnown(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// yamlFields maps each yaml key of struct t to its field's type, inline
// fields' keys included; fields tagged "-" read no key.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range yamlFields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// nearest is the known key closest to key (at most two edits away, or one
// being the other with a suffix), dotted like the unknown one.
func nearest(key string, fields map[string]reflect.Type, path string) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, k := range names {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return join(path, best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
