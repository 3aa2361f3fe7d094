package settings

import (
	"fmt"
	"log/slog"
	"strings"
)

// LogLevel is the level of a kind of log line (setting
// GatewayEndpointLogLevel): debug, info, warn or error. The gateway writes
// lines at info and above, so debug silences that kind. The zero value is
// info.
type LogLevel slog.Level

// Decode parses s, for envconfig: one of debug, info, warn, error (any
// case).
func (l *LogLevel) Decode(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		*l = LogLevel(slog.LevelDebug)
	case "info":
		*l = LogLevel(slog.LevelInfo)
	case "warn":
		*l = LogLevel(slog.LevelWarn)
	case "error":
		*l = LogLevel(slog.LevelError)
	default:
		return fmt.Errorf("want debug, info, warn or error")
	}
	return nil
}

// Level returns l as a slog.Level.
func (l LogLevel) Level() slog.Level { return slog.Level(l) }
