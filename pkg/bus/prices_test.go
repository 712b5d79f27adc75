package bus

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPriceKeyHoldsAnyModelName(t *testing.T) {
	for _, model := range []string{"gpt-4o", "anthropic/claude-3.5-sonnet", "anthropic.claude-v2:1", ".hidden.", "a=b", "a..b",
		"models/gemini 2.5 ✓", "$KV.herald_sessions.x", "*", ">"} {
		key := PriceKey(model)
		require.Regexp(t, `^[-/_=A-Za-z0-9]+$`, key, model)
		back, err := ModelOfPriceKey(key)
		require.NoError(t, err)
		require.Equal(t, model, back)
	}
	for _, bad := range []string{"x=", "x=4", "x=ZZ"} {
		_, err := ModelOfPriceKey(bad)
		require.Error(t, err, bad)
	}
	_, err := DecodeImported(PriceKey("m"), []byte(`{"model":"other","prices":[{"input":1}]}`))
	require.ErrorContains(t, err, "not its key's", "a value cannot price a model under another's key")
	_, err = DecodeImported(PriceKey("m"), []byte(`{"model":"m","prices":[{"input":-1}]}`))
	require.ErrorContains(t, err, "must not be negative")
}
