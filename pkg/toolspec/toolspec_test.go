package toolspec

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every process that sends tools to the model (a lone `herald serve loop`
// included) must know every built-in tool, whichever service runs it.
func TestBuiltinsCoverEveryServicesTools(t *testing.T) {
	want := map[string]string{
		"terminal": "toolrunner", "read_file": "toolrunner", "write_file": "toolrunner", "patch": "toolrunner",
		"search_files": "toolrunner", "todo": "toolrunner", "clarify": "toolrunner",
		"memory": "memory", "session_search": "memory",
	}
	for name, service := range want {
		spec, ok := Lookup(name)
		require.True(t, ok, "%s has no schema", name)
		require.Equal(t, service, spec.Service, name)
		var schema map[string]any
		require.NoError(t, json.Unmarshal([]byte(spec.ParametersJSON()), &schema), name)
		require.Equal(t, "object", schema["type"], name)
	}
}

func TestAllIsSortedAndStable(t *testing.T) {
	a, b := Names(), Names()
	require.Equal(t, a, b)
	for i := 1; i < len(a); i++ {
		require.Less(t, a[i-1], a[i])
	}
}
