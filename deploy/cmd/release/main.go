// Command release writes kvgate's release artifacts (see package
// internal/release for the list):
//
//	cd deploy && go run ./cmd/release -version v0.1.0 -o ../dist
//
// (`make release VERSION=v0.1.0` does this after checking that the
// committed wasm/kvgate.wasm matches its sources). Times come from
// $SOURCE_DATE_EPOCH, else from the last commit, else the Unix epoch, so
// building the same commit twice gives the same bytes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvgate/kvgate/deploy/internal/release"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/repo"
	"github.com/kvgate/kvgate/wasm"
)

func main() {
	version := flag.String("version", "", "release version, e.g. v0.1.0 (the images' tag)")
	out := flag.String("o", "dist", "output directory (must not exist or be empty)")
	registry := flag.String("registry", "ghcr.io/kvgate", "registry and namespace the images will be pushed to")
	flag.Parse()
	if err := run(*version, *out, *registry); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(version, out, registry string) error {
	// The module says its version in its configured log line
	// (filterspec.Version, a constant so that the module's bytes do not
	// depend on the build): a release under another name would lie.
	if version != filterspec.Version {
		return fmt.Errorf("-version %s, but the module calls itself %s: set filterspec.Version (filterspec/version.go) to %s, run make wasm and commit first", version, filterspec.Version, version)
	}
	root, err := repo.Root()
	if err != nil {
		return err
	}
	epoch, err := sourceDateEpoch(root)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	res, err := release.Build(context.Background(), release.Options{
		Version: version, Out: abs, Root: root, Epoch: epoch, Revision: git(root, "rev-parse", "HEAD"),
		Registry: registry, Module: wasm.Module, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Printf("%s/kvgate-filter:%s %s\n%s/kvgate-sidecar:%s %s\n", registry, version, res.FilterDigest, registry, version, res.SidecarDigest)
	return nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, else the last commit's time, else 0.
func sourceDateEpoch(root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		s = git(root, "log", "-1", "--format=%ct")
	}
	if s == "" {
		s = "0"
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %v", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// git runs a git command in root and returns its trimmed output, or "".
func git(root string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
