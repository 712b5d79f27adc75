package gateway

import (
	"encoding/json"
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// The stored tool definitions go out exactly as encoding them afresh would,
// on the first call and on later ones.
func TestToolMemoSendsWhatEncodingWould(t *testing.T) {
	specs := []*heraldpb.ToolSpec{
		{Name: "read_file", Description: "Read a file.", ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`},
		{Name: "no_description", ParametersJson: `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}}`},
		{Name: "broken_schema", Description: "Its schema is not JSON.", ParametersJson: `{"type":`},
		{Name: "no_schema"},
	}
	want, err := json.Marshal(chatToolsToWire(specs))
	require.NoError(t, err)
	var memo toolMemo
	for range 2 {
		got, err := json.Marshal(memo.wire(specs))
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got))
		require.Equal(t, string(want), string(got))
	}
}
