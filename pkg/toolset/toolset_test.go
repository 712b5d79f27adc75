package toolset_test

import (
	"context"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/toolset"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

var tools = []*heraldpb.ToolSpec{
	{Name: "read_file", Description: "Read a file.", ParametersJson: `{"type":"object"}`},
	{Name: "terminal", Description: "Run a command.", ParametersJson: `{"type":"object","properties":{"command":{"type":"string"}}}`},
}

// A set stored by one process is read back by another by its digest alone;
// the digest depends on the definitions, so another set gets another one.
func TestASetStoredOnceIsReadBackByItsDigest(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	data, digest, err := toolset.Encode(tools)
	require.NoError(t, err)
	require.NoError(t, toolset.NewStore(b.JS).Refer(ctx, data, digest))

	got, err := toolset.NewStore(b.JS).Resolve(ctx, digest)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i := range tools {
		require.True(t, gproto.Equal(tools[i], got[i]), "definition %d", i)
	}
	_, other, err := toolset.Encode(tools[:1])
	require.NoError(t, err)
	require.NotEqual(t, digest, other)
}

// A digest nothing is stored under, and a stored set whose bytes do not
// hash to its key, are refused rather than offered to a model.
func TestUnknownOrAlteredSetsAreRefused(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	_, digest, err := toolset.Encode(tools)
	require.NoError(t, err)
	_, err = toolset.NewStore(b.JS).Resolve(ctx, digest)
	require.ErrorIs(t, err, toolset.ErrUnknown)

	other, _, err := toolset.Encode(tools[:1])
	require.NoError(t, err)
	kv, err := b.JS.KeyValue(ctx, bus.BucketToolSets)
	require.NoError(t, err)
	_, err = kv.Put(ctx, digest, other) // another set under this digest
	require.NoError(t, err)
	_, err = toolset.NewStore(b.JS).Resolve(ctx, digest)
	require.ErrorContains(t, err, "do not match their digest")
}
