package main

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
)

// version is set at build time (-ldflags "-X main.version=v1.2.3"); else the
// module's version and the commit the binary was built from, when recorded.
var version = ""

// versionLine is what `herald --version` prints.
func versionLine() string {
	v := version
	var commit string
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				commit = s.Value[:12]
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	if commit != "" {
		v += " " + commit
	}
	return fmt.Sprintf("herald %s (%s %s/%s)", v, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
}
