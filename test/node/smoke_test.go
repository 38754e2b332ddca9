package node

import (
	"testing"
)

func TestNodeUp(t *testing.T) {
	t.Log(bed.NodeName)
}
