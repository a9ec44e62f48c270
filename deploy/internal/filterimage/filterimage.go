// Package filterimage builds the kvgate filter's OCI image with
// go-containerregistry: the "compat" variant of the Wasm image
// specification, the form Istio's image fetcher (pkg/wasm/imagefetcher.go)
// tries first. One gzip-compressed tar layer holds plugin.wasm, under an
// ordinary image config, so that crane, oras, skopeo and any registry
// handle it as a regular image. (Istio's other form, custom wasm media
// types, requires exactly two layers; a single
// application/vnd.module.wasm.content.layer.v1+wasm layer is refused.)
package filterimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// AnnotationVariant marks the compat variant (required by the Wasm
	// image specification for a tar+gzip layer).
	AnnotationVariant = "module.wasm.image/variant"
	// ModuleFile is the module's name in the layer, the name Istio looks for.
	ModuleFile = "plugin.wasm"
	// AnnotationRefName names the image in a layout's index.json, which
	// `oras cp --from-oci-layout DIR:TAG` resolves.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Image is the filter image of module. Its bytes depend on the module
// alone (the epoch as its time, one tar entry, a gzip header without name
// or time, no tag), so its digest is what a registry reports for the
// pushed image and what Istio compares with a WasmPlugin's sha256.
func Image(module []byte) (v1.Image, error) {
	tarball := moduleTar(module)
	layer, err := tarballLayer(tarball)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return nil, err
	}
	diffID, err := layer.DiffID()
	if err != nil {
		return nil, err
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Created:      v1.Time{Time: time.Unix(0, 0).UTC()},
		Architecture: "wasm",
		OS:           "wasip1",
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, map[string]string{
		AnnotationVariant:                      "compat",
		"org.opencontainers.image.title":       "kvgate-filter",
		"org.opencontainers.image.description": "kvgate proxy-wasm filter: admission of kv_hints in LLM request bodies",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://github.com/kvgate/kvgate",
	}).(v1.Image), nil
}

// Digest is the manifest digest of module's image, "sha256:<hex>".
func Digest(module []byte) (string, error) {
	img, err := Image(module)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	return d.String(), err
}

// Write lays out module's image as an OCI image layout in dir; a non-empty
// tag names it in index.json. It returns the manifest digest.
func Write(dir string, module []byte, tag string) (string, error) {
	img, err := Image(module)
	if err != nil {
		return "", err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{AnnotationRefName: tag}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return "", err
	}
	d, err := img.Digest()
	return d.String(), err
}

// ModuleSHA256 is the hex SHA-256 of a module: the WasmPlugin sha256 for a
// file:// or https:// URL.
func ModuleSHA256(module []byte) string {
	s := sha256.Sum256(module)
	return hex.EncodeToString(s[:])
}

func tarballLayer(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
}

// moduleTar is a tar archive with the module as its one file, owned by
// root, dated the Unix epoch.
func moduleTar(module []byte) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ModuleFile, Mode: 0o644,
		Size: int64(len(module)), ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR})
	_, _ = tw.Write(module)
	_ = tw.Close()
	return b.Bytes()
}
