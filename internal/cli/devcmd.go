package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// newDevCommand builds the `dev` command when the binary includes it (dev.go, left out by the nodev build tag).
var newDevCommand func(stdout, stderr io.Writer) *cobra.Command
