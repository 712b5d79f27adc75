// Package logging builds Herald's zerolog loggers with its fixed field names.
package logging

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Field names shared by every service.
const (
	FieldSession  = "session_id"
	FieldTask     = "task_id"
	FieldCall     = "call_id"
	FieldTool     = "tool"
	FieldModel    = "model"
	FieldStream   = "stream"
	FieldConsumer = "consumer"
	FieldService  = "service"
)

// New returns a logger writing to w at level ("debug", "info", "warn", "error"
// or "disabled"). pretty selects human-readable console output.
func New(w io.Writer, level string, pretty bool) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	if pretty {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !colourful(w)}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// colourful reports whether w is a terminal that should get colour codes:
// not a file or pipe (logs redirected keep no escape codes), and NO_COLOR
// unset (https://no-color.org).
func colourful(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
