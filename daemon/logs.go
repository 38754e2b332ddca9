package daemon

import (
	"context"
	"io"
	"log/slog"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// SetupLogs makes every line the process writes one JSON object on w:
// capo's own (slog), client-go's (klog: leader election, reflectors) and
// libcalico-go's (logrus). A log pipeline that parses JSON must never meet a
// plain-text line.
func SetupLogs(w io.Writer, component string, level slog.Level) {
	l := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("component", component)
	slog.SetDefault(l)
	klog.SetSlogLogger(l.With("source", "client-go"))
	logrus.SetOutput(io.Discard)
	// libcalico-go logs every datastore call at info: keep its warnings
	// unless capo itself is at debug.
	logrus.SetLevel(logrus.WarnLevel)
	if level <= slog.LevelDebug {
		logrus.SetLevel(logrus.DebugLevel)
	}
	logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{})
	logrus.AddHook(logrusToSlog{l.With("source", "libcalico-go")})
}

// logrusToSlog forwards logrus entries to slog.
type logrusToSlog struct{ l *slog.Logger }

func (logrusToSlog) Levels() []logrus.Level { return logrus.AllLevels }

func (h logrusToSlog) Fire(e *logrus.Entry) error {
	level := slog.LevelInfo
	switch {
	case e.Level <= logrus.ErrorLevel:
		level = slog.LevelError
	case e.Level == logrus.WarnLevel:
		level = slog.LevelWarn
	case e.Level >= logrus.DebugLevel:
		level = slog.LevelDebug
	}
	attrs := make([]any, 0, 2*len(e.Data))
	for k, v := range e.Data {
		attrs = append(attrs, k, v)
	}
	h.l.Log(context.Background(), level, e.Message, attrs...)
	return nil
}
