package loop

import "runtime"

func runtimeOS() string { return runtime.GOOS + "/" + runtime.GOARCH }
