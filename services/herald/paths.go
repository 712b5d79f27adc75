package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/heraldrun/herald/pkg/config"
)

// absPaths makes the data folder and the workspace root absolute, every
// symlink evaluated, once when a command starts. Every service of the
// process then compares the same real locations: a relative ./.herald
// resolved against the working directory in one place and against its real
// location in another made the tool runner refuse every call ("workspace
// \"\": path is outside the workspace") when the folder was reached through
// a symlink (/tmp is one on some machines).
func absPaths(cfg *config.Config) error {
	for _, p := range []*string{&cfg.DataDir, &cfg.Workspace} {
		if *p == "" {
			continue
		}
		real, err := realPath(*p)
		if err != nil {
			return err
		}
		*p = real
	}
	return nil
}

// workingDir is the current directory's real location (os.Getwd may answer
// with $PWD, a path through symlinks).
func workingDir() (string, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return realPath(cwd)
}

// realPath is p made absolute with the symlinks of its deepest existing
// ancestor evaluated; the part that does not exist yet is appended as given.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(real, rest), nil
}
