package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A key's run may name only a pool its tenant may use (tenants.<t>.pools):
// another tenant's reserved pool, or a pool outside the tenant's own, is
// refused at the door with the reason, and nothing starts.
func TestAKeysRunMayNameOnlyItsTenantsPools(t *testing.T) {
	h := startHerald(t, "tenants:\n  acme: {pools: [acme-pool]}\n")
	key := func(tenant string) string {
		out, errOut, code := h.cli(t, "keys", "create", "--tenant", tenant, "--json")
		require.Equal(t, 0, code, errOut)
		var k struct{ Key string }
		require.NoError(t, json.Unmarshal([]byte(out), &k))
		return k.Key
	}
	acme, beta := key("acme"), key("beta")

	for _, c := range []struct {
		key, pool, says string
	}{
		{beta, "acme-pool", `pool "acme-pool" is reserved to tenant(s) [acme]`},
		{acme, "default", `pool "default" is not one of tenant "acme"'s`},
	} {
		var e apiErr
		resp := call(t, "POST", h.URL+"/v1/runs", c.key, map[string]any{"prompt": "say: hi", "pool": c.pool}, &e)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, c.pool)
		require.Equal(t, "pool_forbidden", e.Error.Code)
		require.Contains(t, e.Error.Message, c.says)
	}
	require.Empty(t, h.model.Requests(), "a refused run reached the model")

	// The tenant's own pool is accepted (its run waits for a runner of it).
	rc := startRun(t, h, acme, map[string]any{"prompt": "say: hi", "pool": "acme-pool"})
	require.Equal(t, "acme", rc.Tenant)
}
