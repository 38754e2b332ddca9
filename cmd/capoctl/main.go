// Command capoctl shows and ends capo's reservations, and explains whether a
// pod's address would be reserved; see package capoctl. Installed as
// kubectl-capo it is also `kubectl capo`.
package main

import (
	"os"

	"github.com/capo-net/capo/capoctl"
)

func main() { os.Exit(capoctl.Run(os.Args[0], os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
