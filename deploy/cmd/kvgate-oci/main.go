// Command kvgate-oci writes the kvgate module as an OCI image layout that
// Istio's WasmPlugin pulls (internal/filterimage, go-containerregistry):
//
//	cd deploy && go run ./cmd/kvgate-oci -o /tmp/kvgate-oci -tag v0.1.0
//	oras cp --from-oci-layout /tmp/kvgate-oci:v0.1.0 ghcr.io/OWNER/kvgate-filter:v0.1.0
//
// It prints the image digest, which is the WasmPlugin's sha256 for the
// oci:// URL, and the module's own sha256 for file:// and https:// URLs.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kvgate/kvgate/deploy/internal/filterimage"
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
	d, err := filterimage.Write(*out, b, *tag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvgate-oci:", err)
		os.Exit(1)
	}
	fmt.Printf("image digest: %s\nWasmPlugin sha256: %s\nmodule sha256 (file:// and https:// URLs): %s\n",
		d, strings.TrimPrefix(d, "sha256:"), filterimage.ModuleSHA256(b))
}
