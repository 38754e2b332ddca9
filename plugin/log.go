package plugin

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// configureLogging sends logs to stderr (or log_file): stdout belongs to the
// CNI result. A log file that cannot be opened falls back to stderr rather
// than failing the call.
func configureLogging(level, file, containerID string) (closeFn func()) {
	var w io.Writer = os.Stderr
	closeFn = func() {}
	if file != "" {
		if err := os.MkdirAll(filepath.Dir(file), 0o750); err == nil {
			if f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
				w, closeFn = f, func() { _ = f.Close() }
			}
		}
	}
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn", "warning":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
	slog.SetDefault(slog.New(h).With("plugin", PluginType, "containerID", containerID, "command", os.Getenv("CNI_COMMAND")))
	return closeFn
}
