// Command reaphubs kills the local hub processes whose test binary is gone (localhub.ReapOrphans) and prints their
// PIDs: make stress runs it once it has killed its load, whose hubs would otherwise keep the cores busy until the
// next hub starts.
package main

import (
	"fmt"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
)

func main() {
	if killed := localhub.ReapOrphans(); len(killed) > 0 {
		fmt.Println("stopped the hub processes the load left behind:", killed)
	}
}
