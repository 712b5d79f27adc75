// Package logging builds Herald's zerolog loggers with its fixed field names.
package logging

import (
	"io"
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
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
