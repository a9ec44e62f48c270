package envoy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"time"
)

// Media types of the module's OCI image. The image is the "compat" variant
// of the Wasm image specification, the form that Istio's image fetcher
// (pkg/wasm/imagefetcher.go) tries first: one gzip-compressed tar layer
// holding plugin.wasm, with an ordinary image config, so that crane, oras,
// skopeo and any registry handle it as a regular image. (Istio's other
// form, custom wasm media types, requires exactly two layers; a single
// application/vnd.module.wasm.content.layer.v1+wasm layer is refused.)
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Annotations of the image manifest. None depends on the tag or the time,
// so the digest depends only on the module.
const (
	// AnnotationVariant marks the compat variant (required by the Wasm
	// image specification for a tar+gzip layer).
	AnnotationVariant = "module.wasm.image/variant"
	// ModuleFile is the module's name in the layer, the name Istio looks for.
	ModuleFile = "plugin.wasm"
)

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Image is an OCI image of the module, laid out as an OCI image layout
// directory (https://github.com/opencontainers/image-spec/blob/main/image-layout.md).
type Image struct {
	// Files maps each path of the layout to its content.
	Files map[string][]byte
	// Digest is the manifest's digest, "sha256:<hex>": what a registry
	// reports for the pushed image and what Istio compares with a
	// WasmPlugin's sha256 for an oci:// URL.
	Digest string
}

// OCIImage builds the image of module; a non-empty tag names it in the
// layout's index.json (org.opencontainers.image.ref.name, which
// `oras cp --from-oci-layout DIR:TAG` resolves). The bytes depend only on
// the module and the tag (fixed timestamps, one tar entry, a fixed gzip
// header), and the manifest, hence the digest, on the module alone:
// `crane push DIR REGISTRY/REPO:TAG` pushes exactly this manifest.
func OCIImage(module []byte, tag string) Image {
	files := map[string][]byte{}
	put := func(mediaType string, b []byte, ann map[string]string) Descriptor {
		d := Descriptor{MediaType: mediaType, Digest: digest(b), Size: len(b), Annotations: ann}
		files[path.Join("blobs", "sha256", d.Digest[len("sha256:"):])] = b
		return d
	}
	tarball := moduleTar(module)
	layer := put(MediaTypeLayer, gzipped(tarball), nil)
	config, _ := json.Marshal(map[string]any{
		"created":      "1970-01-01T00:00:00Z",
		"architecture": "wasm",
		"os":           "wasip1",
		"config":       map[string]any{},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest(tarball)}},
	})
	cfg := put(MediaTypeConfig, config, nil)
	manifest, _ := json.Marshal(struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		Config        Descriptor        `json:"config"`
		Layers        []Descriptor      `json:"layers"`
		Annotations   map[string]string `json:"annotations"`
	}{2, MediaTypeManifest, cfg, []Descriptor{layer}, map[string]string{
		AnnotationVariant:                      "compat",
		"org.opencontainers.image.title":       "kvgate-filter",
		"org.opencontainers.image.description": "kvgate proxy-wasm filter: admission of kv_hints in LLM request bodies",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://github.com/kvgate/kvgate",
	}})
	var ann map[string]string
	if tag != "" {
		ann = map[string]string{"org.opencontainers.image.ref.name": tag}
	}
	m := put(MediaTypeManifest, manifest, ann)
	index, _ := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []Descriptor `json:"manifests"`
	}{2, MediaTypeIndex, []Descriptor{m}})
	files["index.json"] = index
	files["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	return Image{Files: files, Digest: m.Digest}
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

// gzipped compresses b with an empty gzip header (no name, no time).
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

// ModuleSHA256 is the hex SHA-256 of a module: the WasmPlugin sha256 for a
// file:// or https:// URL.
func ModuleSHA256(module []byte) string {
	s := sha256.Sum256(module)
	return hex.EncodeToString(s[:])
}

func digest(b []byte) string { return "sha256:" + ModuleSHA256(b) }
