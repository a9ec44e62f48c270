// Command kvgate-oci writes the kvgate module as an OCI image layout that
// Istio's WasmPlugin can pull once pushed, and prints the image digest (the
// WasmPlugin's sha256 for an oci:// URL):
//
//	go run ./envoy/cmd/kvgate-oci -o /tmp/kvgate-oci -tag v0.1.0
//	oras cp --from-oci-layout /tmp/kvgate-oci:v0.1.0 ghcr.io/OWNER/kvgate-filter:v0.1.0
//
// The layout has no timestamps, so the digest depends only on the module and
// the tag.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/wasm"
)

func main() {
	out := flag.String("o", "kvgate-oci", "output directory (an OCI image layout)")
	tag := flag.String("tag", "v0.1.0", "image tag recorded in index.json")
	module := flag.String("module", "", "module file; empty: the embedded wasm/kvgate.wasm")
	flag.Parse()
	b := wasm.Module
	if *module != "" {
		var err error
		if b, err = os.ReadFile(*module); err != nil {
			fmt.Fprintln(os.Stderr, "kvgate-oci:", err)
			os.Exit(1)
		}
	}
	img := envoy.OCIImage(b, *tag)
	for name, data := range img.Files {
		p := filepath.Join(*out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "kvgate-oci:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "kvgate-oci:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("image digest: %s\nWasmPlugin sha256: %s\nmodule sha256 (file:// and https:// URLs): %s\n",
		img.Digest, strings.TrimPrefix(img.Digest, "sha256:"), envoy.ModuleSHA256(b))
}
