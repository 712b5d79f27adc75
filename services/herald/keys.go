package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/services/api"
	"github.com/nats-io/nats.go/jetstream"
)

const keysUsage = `usage: herald keys create --tenant T [--name NAME] [--max-concurrent N] [--json] | list [--json] | revoke ID`

// cmdKeys manages the api service's keys: create prints a new key once,
// list never shows one, revoke takes effect on the next request.
func cmdKeys(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("keys", cio.err)
	var c common
	c.register(fs)
	tenant := fs.String("tenant", "", "create: the tenant the key binds every request to")
	name := fs.String("name", "", "create: a name to recognise the key by")
	maxConcurrent := fs.Int("max-concurrent", 0, "create: runs the key may have going at once (0: no cap of its own)")
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 0 || (pos[0] == "revoke") != (len(pos) == 2) || len(pos) > 2 ||
		(pos[0] != "create" && pos[0] != "list" && pos[0] != "revoke") {
		fmt.Fprintln(cio.err, keysUsage)
		return exitUsage
	}
	if pos[0] == "create" && *tenant == "" {
		fmt.Fprintln(cio.err, "herald keys create: --tenant is required (a key binds its tenant)")
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald keys:", err)
		return exitUsage
	}
	js, closeFn, err := openBus(cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald keys:", err)
		return exitFail
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := ensureKeysBucket(ctx, js, cfg.Replicas); err != nil {
		fmt.Fprintln(cio.err, "herald keys:", err)
		return exitFail
	}
	switch pos[0] {
	case "create":
		k, secret, err := api.CreateKey(ctx, js, *tenant, *name, *maxConcurrent)
		if errors.Is(err, api.ErrInvalidKey) {
			fmt.Fprintln(cio.err, "herald keys create:", err)
			return exitUsage
		}
		if err != nil {
			fmt.Fprintln(cio.err, "herald keys create:", err)
			return exitFail
		}
		if *jsonOut {
			data, _ := json.Marshal(map[string]string{"id": k.ID, "key": secret, "tenant": k.Tenant})
			fmt.Fprintln(cio.out, string(data))
			return exitOK
		}
		fmt.Fprintf(cio.err, "Key %s for tenant %s. It is shown once, now; Herald keeps only its SHA-256.\n", k.ID, k.Tenant)
		fmt.Fprintln(cio.out, secret)
		return exitOK
	case "list":
		return listKeys(ctx, js, cio, *jsonOut)
	}
	if err := api.RevokeKey(ctx, js, pos[1]); err != nil {
		fmt.Fprintln(cio.err, "herald keys revoke:", err)
		if errors.Is(err, api.ErrNoSuchKey) {
			return exitUsage
		}
		return exitFail
	}
	fmt.Fprintf(cio.out, "revoked %s\n", pos[1])
	return exitOK
}

func listKeys(ctx context.Context, js jetstream.JetStream, cio cliIO, jsonOut bool) int {
	keys, err := api.ListKeys(ctx, js)
	if err != nil {
		fmt.Fprintln(cio.err, "herald keys list:", err)
		return exitFail
	}
	if jsonOut {
		printJSONList(cio.out, keys)
		return exitOK
	}
	tw := tabwriter.NewWriter(cio.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTENANT\tMAX CONCURRENT\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", k.ID, k.Name, k.Tenant, k.MaxConcurrent, k.CreatedAt.Format(time.DateTime))
	}
	_ = tw.Flush()
	return exitOK
}

// ensureKeysBucket creates the keys bucket on a server declared by an
// older Herald.
func ensureKeysBucket(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if _, err := js.KeyValue(ctx, bus.BucketAPIKeys); !errors.Is(err, jetstream.ErrBucketNotFound) {
		return err
	}
	for _, cfg := range bus.Buckets(replicas) {
		if cfg.Bucket == bus.BucketAPIKeys {
			_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		}
	}
	return nil
}

// printJSONList prints list as one JSON array, [] when it is empty.
func printJSONList[T any](w io.Writer, list []T) {
	if list == nil {
		list = []T{}
	}
	data, _ := json.Marshal(list)
	fmt.Fprintln(w, string(data))
}
