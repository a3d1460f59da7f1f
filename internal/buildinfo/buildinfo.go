// Package buildinfo holds the version stamped into the binary at link time (make build, the Containerfile:
// -ldflags "-X github.com/dcm-sp/acm-cluster-sp/internal/buildinfo.version=v0.3.1").
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version is set with -ldflags -X; empty when built without the Makefile.
var version string

// Version returns the stamped version. Unstamped builds (go run, go test) say so explicitly rather than passing for
// a release: "v0.0.0-unstamped+<vcs revision>" or "v0.0.0-unstamped".
func Version() string {
	if version != "" {
		return version
	}
	v := "v0.0.0-unstamped"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" && !strings.HasPrefix(bi.Main.Version, "v0.0.0-") {
			v = bi.Main.Version
		}
	}
	return v
}
