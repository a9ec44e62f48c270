// Package version says which kvgate a binary is: the release version, the
// source revision and the Go toolchain that built it. The sidecar and the
// kvhints CLI print it for -version, and the sidecar exports it as
// kvgate_build_info on /metrics. (The wasm module's version is
// filterspec.Version, a constant: see there.)
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release a binary was built as. `make release VERSION=v…`
// sets it with
//
//	-ldflags "-X github.com/kvgate/kvgate/internal/version.Version=v…"
//
// and any other build leaves it "dev".
var Version = "dev"

// Revision is the source revision, set at link time by `make release`
// (which builds with -buildvcs=false, for reproducible binaries);
// otherwise it is read from the build information.
var Revision = ""

// Info is what a binary knows about its own build.
type Info struct {
	// Version is Version: "dev", or the release set at link time.
	Version string
	// Revision is the VCS revision the binary was built from ("-dirty"
	// appended for a modified tree), or "unknown" when the build recorded
	// none (go build -buildvcs=false, or outside a repository).
	Revision string
	// GoVersion is the Go toolchain's version, e.g. "go1.24.2".
	GoVersion string
}

// Get returns the running binary's build information.
func Get() Info {
	info := Info{Version: Version, Revision: "unknown", GoVersion: runtime.Version()}
	if Revision != "" {
		info.Revision = Revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.Revision = revision(bi.Settings)
	if Revision != "" {
		info.Revision = Revision
	}
	return info
}

// revision reads vcs.revision and vcs.modified from build settings.
func revision(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Line is what -version prints for the binary called name:
// "NAME VERSION (revision REV, GOVERSION)".
func (i Info) Line(name string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(i.Version)
	b.WriteString(" (revision ")
	b.WriteString(i.Revision)
	b.WriteString(", ")
	b.WriteString(i.GoVersion)
	b.WriteByte(')')
	return b.String()
}
