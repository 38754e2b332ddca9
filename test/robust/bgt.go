package robust

import (
	"errors"
	"fmt"
	"testing"
)

// bgT is the test's testing.TB for the bed's helpers when they run off
// the test's goroutine (restarts, traffic workers): those helpers Fatal on
// failure, which only the test's own goroutine may do. Here a Fatal panics
// with a bedFatal, which try turns back into an error.
type bgT struct{ testing.TB }

type bedFatal struct{ msg string }

func (bgT) Fatal(args ...any)                 { panic(bedFatal{fmt.Sprint(args...)}) }
func (bgT) Fatalf(format string, args ...any) { panic(bedFatal{fmt.Sprintf(format, args...)}) }
func (bgT) FailNow()                          { panic(bedFatal{"FailNow"}) }

// try runs f, a call of the bed's helpers, and returns what they would
// have failed the test with.
func try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			bf, ok := r.(bedFatal)
			if !ok {
				panic(r)
			}
			err = errors.New(bf.msg)
		}
	}()
	f()
	return nil
}
