package reserve

import "context"

type writtenKey struct{}

// WithWritten has a Store that releases in steps (a write per object, one
// after another) tell written the refs each write ended as soon as it
// lands, before the next is made: a caller that logs its releases logs
// each when it happened, not after the slowest write of the call. A store
// that writes once may tell once, or not at all; Release's result still
// names every ref released.
func WithWritten(ctx context.Context, written func([]Ref)) context.Context {
	return context.WithValue(ctx, writtenKey{}, written)
}

// Written is what WithWritten put in ctx, or nil.
func Written(ctx context.Context) func([]Ref) {
	f, _ := ctx.Value(writtenKey{}).(func([]Ref))
	return f
}
