package plugin

import (
	"log/slog"
	"time"
)

// started is when capo-ipam's own code began to run (package
// initialisation): the first moment it can see of itself. What came before
// is the process start, which only the caller can time.
var started = time.Now()

// steps times one call's steps for the debug log, so that where an ADD's
// time goes besides the process start can be read off one line (the
// trace benchmark does). Its methods do nothing on a nil *steps.
type steps struct {
	last  time.Time
	attrs []any
}

func newSteps() *steps {
	return &steps{last: started, attrs: []any{"startedUnixNano", started.UnixNano()}}
}

// done notes that the step called name ended now.
func (s *steps) done(name string) {
	if s == nil {
		return
	}
	now := time.Now()
	s.attrs = append(s.attrs, name+"Micros", now.Sub(s.last).Microseconds())
	s.last = now
}

// log writes the steps at debug level, with when the last one ended.
func (s *steps) log(msg string) {
	if s == nil {
		return
	}
	slog.Debug(msg, append(s.attrs, "endedUnixNano", s.last.UnixNano())...)
}
