package filterimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kvgate/kvgate/wasm"
)

// The image, read back from its layout as Istio's fetcher reads it: an OCI
// manifest of the compat variant, an OCI config, one tar+gzip layer holding
// plugin.wasm; the same digest every time; the tag in index.json.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	d, err := Write(dir, wasm.Module, "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Digest(wasm.Module); again != d {
		t.Errorf("digest %s, then %s", d, again)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := p.ImageIndex()
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[AnnotationRefName] != "v9.9.9" || im.Manifests[0].Digest.String() != d ||
		im.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Fatalf("index %+v", im)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	if m.Annotations[AnnotationVariant] != "compat" || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest %+v", m)
	}
	cf, _ := img.ConfigFile()
	if cf.OS != "wasip1" || cf.Architecture != "wasm" || cf.Created.Unix() != 0 || len(cf.History) != 0 {
		t.Errorf("config %+v", cf)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Name != ModuleFile {
		t.Fatalf("layer: %v %v", h, err)
	}
	b, _ := io.ReadAll(tr)
	if !bytes.Equal(b, wasm.Module) {
		t.Error("plugin.wasm is not the module")
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("a second file in the layer: %v", err)
	}
}

// The committed Istio manifest and the chart's CI values pin the digest of
// the committed module's image (make wasm writes both).
func TestCommittedDigests(t *testing.T) {
	d, err := Digest(wasm.Module)
	if err != nil {
		t.Fatal(err)
	}
	hex := d[len("sha256:"):]
	for f, re := range map[string]string{
		"../../../envoy/istio/wasmplugin.yaml":   `(?m)^  sha256: ([0-9a-f]{64})$`,
		"../../helm/kvgate/ci/istio-values.yaml": `(?m)^  filterSHA256: "([0-9a-f]{64})"$`,
	} {
		b, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(re).FindSubmatch(b)
		if m == nil || string(m[1]) != hex {
			t.Errorf("%s: sha256 %s, want the committed module's image digest %s (run make wasm)", f, m, hex)
		}
	}
}
