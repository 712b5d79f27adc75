package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/logging"
	"github.com/rs/zerolog"
)

// parseInterspersed parses flags that may come before or after positional
// arguments ("herald run "fix it" --json").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// common are the flags every command shares.
type common struct {
	configPath string
	logLevel   string
	// stderr is where load warns (the flag set's output).
	stderr io.Writer
}

func (c *common) register(fs *flag.FlagSet) {
	c.stderr = fs.Output()
	fs.StringVar(&c.configPath, "config", "", "path to herald.yaml (default: ./herald.yaml or HERALD_CONFIG)")
	fs.StringVar(&c.logLevel, "log-level", "", "log level: debug, info, warn, error (default warn for run, info otherwise)")
}

func (c *common) load() (config.Config, error) {
	cfg, err := config.Load(c.configPath)
	if err != nil {
		return config.Config{}, fmt.Errorf("configuration: %w", err)
	}
	if err := absPaths(&cfg); err != nil {
		return config.Config{}, fmt.Errorf("configuration: %w", err)
	}
	if c.stderr != nil {
		path, unknown := c.unknownKeys()
		for _, k := range unknown {
			fmt.Fprintf(c.stderr, "herald: warning: %s: unknown key %s (ignored)\n", path, k)
		}
	}
	return cfg, nil
}

// unknownKeys are the keys of the herald.yaml this command reads that no
// setting has (config.UnknownKeys), with the file's path.
func (c *common) unknownKeys() (string, []config.UnknownKey) {
	path := localConfigFile(*c)
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return path, nil
	}
	keys, _ := config.UnknownKeys(data) // a parse error was reported by Load
	return path, keys
}

func (c *common) logger(w io.Writer, def string) zerolog.Logger {
	level := c.logLevel
	if level == "" {
		level = os.Getenv("HERALD_LOG_LEVEL")
	}
	if level == "" {
		level = def
	}
	return logging.New(w, level, os.Getenv("HERALD_LOG_FORMAT") != "json")
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("herald "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func usageError(err error) bool { return err != nil && !errors.Is(err, flag.ErrHelp) }

// ageFlag is a DURATION flag that takes days too ("7d", as well as "24h";
// "0" for no limit): the parser of insights and sessions prune.
func ageFlag(fs *flag.FlagSet, name string, usage string) *time.Duration {
	d := new(time.Duration)
	fs.Func(name, usage, func(s string) error {
		v, err := parseAge(s)
		*d = v
		return err
	})
	return d
}
