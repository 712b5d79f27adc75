package config

import (
	"fmt"
	"slices"
	"sort"
)

// TenantPool is the tool-runner pool a task bound to tenant runs its tools
// in, given the pool it names (or its session last ran in) and the pool its
// loop would choose for it (fallback). A tenant with pools runs only in
// them, in the first when its task names none; a tenant without may use any
// pool but one that other tenants reserve by listing it. So tenants split
// into pools on separate machines (docs/SECURITY.md) stay there whatever
// their tasks say.
func (c Config) TenantPool(tenant, named, fallback string) (string, error) {
	own := c.Tenants[tenant].Pools
	pool := named
	if pool == "" && len(own) > 0 {
		pool = own[0]
	}
	if pool == "" {
		pool = fallback
	}
	if len(own) > 0 {
		if !slices.Contains(own, pool) {
			return "", fmt.Errorf("pool %q is not one of tenant %q's (tenants.%s.pools: %v)", pool, tenant, tenant, own)
		}
		return pool, nil
	}
	if holders := c.poolHolders(pool); len(holders) > 0 {
		return "", fmt.Errorf("pool %q is reserved to tenant(s) %v (their tenants.<name>.pools); tenant %q may not use it", pool, holders, tenant)
	}
	return pool, nil
}

// poolHolders lists the tenants whose pools name pool.
func (c Config) poolHolders(pool string) []string {
	var names []string
	for name, l := range c.Tenants {
		if slices.Contains(l.Pools, pool) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (c Config) validatePools() []error {
	var errs []error
	for name, l := range c.Tenants {
		for _, p := range l.Pools {
			if !ValidTenant(p) { // a pool is one subject token, as a tenant is
				errs = append(errs, fmt.Errorf("tenants.%s.pools: %q is not a pool name (letters, digits, '-' and '_', at most 128)", name, p))
			}
		}
	}
	return errs
}
