package pause

import (
	"context"
	"testing"
	"time"
)

func TestSleepEndsWithTheContext(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a full wait must report true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Minute) || time.Since(start) > time.Second {
		t.Fatal("a cancelled context must end the wait at once and report false")
	}
}
