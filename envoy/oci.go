package envoy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
)

// OCI media types of a Wasm module image in the OCI-spec format that Istio's
// WasmPlugin reads (the "wasm variant": one layer holding the module bytes).
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeConfig   = "application/vnd.module.wasm.config.v1+json"
	MediaTypeLayer    = "application/vnd.module.wasm.content.layer.v1+wasm"
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

// OCIImage builds the image of module, tagged tag. The bytes depend only on
// the module and the tag (no timestamps), so the digest is reproducible:
// `oras cp --from-oci-layout DIR:TAG REGISTRY/REPO:TAG` or
// `crane push DIR REGISTRY/REPO:TAG` pushes exactly this manifest.
func OCIImage(module []byte, tag string) Image {
	files := map[string][]byte{}
	put := func(mediaType string, b []byte, ann map[string]string) Descriptor {
		d := Descriptor{MediaType: mediaType, Digest: digest(b), Size: len(b), Annotations: ann}
		files[path.Join("blobs", "sha256", d.Digest[len("sha256:"):])] = b
		return d
	}
	config := put(MediaTypeConfig, []byte(`{"created":"1970-01-01T00:00:00Z","architecture":"wasm","os":"wasip1"}`), nil)
	layer := put(MediaTypeLayer, module, map[string]string{"org.opencontainers.image.title": "plugin.wasm"})
	manifest, _ := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Config        Descriptor   `json:"config"`
		Layers        []Descriptor `json:"layers"`
	}{2, MediaTypeManifest, config, []Descriptor{layer}})
	m := put(MediaTypeManifest, manifest, map[string]string{"org.opencontainers.image.ref.name": tag})
	index, _ := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []Descriptor `json:"manifests"`
	}{2, MediaTypeIndex, []Descriptor{m}})
	files["index.json"] = index
	files["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	return Image{Files: files, Digest: m.Digest}
}

// ModuleSHA256 is the hex SHA-256 of a module: the WasmPlugin sha256 for a
// file:// or https:// URL.
func ModuleSHA256(module []byte) string {
	s := sha256.Sum256(module)
	return hex.EncodeToString(s[:])
}

func digest(b []byte) string { return "sha256:" + ModuleSHA256(b) }
