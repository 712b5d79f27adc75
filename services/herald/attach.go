package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldrun/herald/services/herald/internal/app"
)

// attachNotice tells the user of `herald run`/`chat` that the task goes to a
// Herald already running (its workspace, not this folder, is where the tools
// work) and which of their local settings that server does not take.
func attachNotice(w io.Writer, rt *runtime, f runFlags) {
	if rt.app != nil {
		return
	}
	server := "the running Herald at " + app.RedactURL(rt.url)
	if h := rt.holder; h != nil {
		server += fmt.Sprintf(" (pid %d: %s)", h.PID, h.Command)
	}
	where := "its tool runners' workspace"
	if h := rt.holder; h != nil && h.Workspace != "" {
		where = h.Workspace
	}
	if f.workspace != "" {
		where = filepath.Join(where, f.workspace)
	}
	fmt.Fprintf(w, "herald: attached to %s; the tools work in %s\n", server, where)
	var warns []string
	if cwd, err := workingDir(); err == nil && (rt.holder == nil || !within(cwd, rt.holder.Workspace)) {
		warns = append(warns, fmt.Sprintf("the tools do not see this folder (%s): put files in the server's workspace, or stop the server to run here", cwd))
	}
	if f.model == "" {
		if m := os.Getenv("HERALD_MODEL"); m != "" {
			warns = append(warns, fmt.Sprintf("HERALD_MODEL=%s is not sent: the server calls its own model; pass --model %s to ask for it", m, m))
		}
	}
	if path := localConfigFile(f.common); path != "" {
		warns = append(warns, fmt.Sprintf("%s is not read by the server: its own configuration applies (providers, tools, approvals); only --model, --tenant, --workspace, --pool, --max-iterations and --max-cost travel with the task", path))
	}
	if os.Getenv("HERALD_WORKSPACE") != "" {
		warns = append(warns, "HERALD_WORKSPACE is not used: the server's workspace root applies (--workspace names a folder under it)")
	}
	for _, s := range warns {
		fmt.Fprintln(w, "  ⚠ "+s)
	}
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// localConfigFile is the herald.yaml this command read, if it read one.
func localConfigFile(c common) string {
	path := c.configPath
	if path == "" {
		path = os.Getenv("HERALD_CONFIG")
	}
	if path == "" {
		path = "herald.yaml" // as config.Load looks for it
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}
