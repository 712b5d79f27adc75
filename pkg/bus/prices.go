package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketPrices holds the prices `herald prices import` read from public
// catalogues, one key per model (PriceKey), the value a pricing.Imported
// as JSON. Every gateway watches it, so an import is in force for their
// next calls without a restart; herald.yaml's prices still win.
const BucketPrices = "herald_prices"

// PriceKey is model's key in BucketPrices: its name with every byte a KV
// key may not hold (anything but letters, digits, '-', '_' and '/') written
// =XX, so any model name has one key and keys read back (ModelOfPriceKey).
func PriceKey(model string) string {
	var b strings.Builder
	for i := 0; i < len(model); i++ {
		c := model[i]
		if c == '-' || c == '_' || c == '/' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}

// ModelOfPriceKey reads a PriceKey back.
func ModelOfPriceKey(key string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] != '=' {
			b.WriteByte(key[i])
			continue
		}
		if i+2 >= len(key) {
			return "", fmt.Errorf("price key %q: a cut =XX", key)
		}
		var c byte
		if _, err := fmt.Sscanf(key[i+1:i+3], "%02X", &c); err != nil {
			return "", fmt.Errorf("price key %q: %q is not =XX", key, key[i:i+3])
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}

// DecodeImported reads one BucketPrices value and checks it as herald.yaml
// prices are checked; a value that fails is not used.
func DecodeImported(key string, data []byte) (pricing.Imported, error) {
	var imp pricing.Imported
	if err := json.Unmarshal(data, &imp); err != nil {
		return imp, fmt.Errorf("imported price %s: %w", key, err)
	}
	model, err := ModelOfPriceKey(key)
	if err != nil {
		return imp, err
	}
	if imp.Model != model {
		return imp, fmt.Errorf("imported price %s: its model %q is not its key's", key, imp.Model)
	}
	for _, p := range imp.Prices {
		if err := p.Validate(model); err != nil {
			return imp, err
		}
	}
	return imp, nil
}

// LoadImportedPrices reads every imported price. A value that does not
// decode is left out and named in bad.
func LoadImportedPrices(ctx context.Context, kv jetstream.KeyValue) (prices map[string]pricing.Imported, bad []error, err error) {
	prices = map[string]pricing.Imported{}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, nil, err
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		imp, err := DecodeImported(k, e.Value())
		if err != nil {
			bad = append(bad, err)
			continue
		}
		prices[imp.Model] = imp
	}
	return prices, bad, nil
}

// PutImportedPrice stores one model's imported prices.
func PutImportedPrice(ctx context.Context, kv jetstream.KeyValue, imp pricing.Imported) error {
	data, err := json.Marshal(imp)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, PriceKey(imp.Model), data)
	return err
}
