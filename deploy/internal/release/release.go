// Package release builds kvgate's release artifacts into a directory
// (`make release VERSION=v… ` writes dist/):
//
//	kvgate-filter/             the wasm filter, an OCI image layout in the form Istio's WasmPlugin pulls
//	kvgate-sidecar/            the sidecar, a multi-arch (linux/amd64, linux/arm64) OCI image layout
//	kvgate-sidecar-linux-*     the sidecar's static binaries
//	kvhints-{linux,darwin}-*   the kvhints CLI
//	kvgate.wasm                the module itself (for file:// and https:// URLs)
//	libkvgate-linux-*.so       the native Envoy dynamic module (envoy/native), for Envoy 1.39 and 1.40
//	wasmplugin.yaml            envoy/istio/wasmplugin.yaml with the release's image and digest
//	images.txt                 each image's reference and digest
//	SHA256SUMS                 sha256sum's format, for every file above
//
// Everything is reproducible: the same sources, Go toolchain, version and
// epoch give the same bytes. Binaries are built with CGO_ENABLED=0,
// -trimpath, -buildvcs=false and no build ID; tar entries are sorted, owned
// by fixed ids and dated the epoch; gzip headers carry no name or time; the
// image configs' dates are the epoch. No Docker daemon is involved: the
// layouts are written with go-containerregistry.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kvgate/kvgate/deploy/internal/filterimage"
)

// Image paths and identities.
const (
	// SidecarBinary is the sidecar's path in its image.
	SidecarBinary = "/usr/local/bin/kvgate-sidecar"
	// UID and GID run the sidecar (the "nonroot" user of distroless images).
	UID = 65532
	GID = 65532
	// CacheDir is a directory the sidecar's user owns, for -cache-dir
	// (mount an emptyDir or tmpfs there when the root filesystem is
	// read-only).
	CacheDir = "/var/cache/kvgate"
)

// Entrypoint is the sidecar image's entrypoint: listeners on every
// address, as a container needs; arguments (-upstream, ...) follow, and a
// later -listen or -admin wins.
var Entrypoint = []string{SidecarBinary, "-listen", "0.0.0.0:8080", "-admin", "0.0.0.0:9090"}

// Platforms of the sidecar image and binaries.
var SidecarPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}

// CLIPlatforms of the kvhints binaries.
var CLIPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"}, {OS: "darwin", Architecture: "arm64"}}

// Options say what to build.
type Options struct {
	// Version is the release, e.g. v0.1.0: the images' tag.
	Version string
	// Out is the output directory; it must not exist or be empty.
	Out string
	// Root is the repository root (the main module).
	Root string
	// Epoch is the time recorded everywhere (SOURCE_DATE_EPOCH).
	Epoch time.Time
	// Revision is the source revision recorded in the image labels.
	Revision string
	// Registry is where the images will be pushed, e.g. ghcr.io/kvgate:
	// it names them in wasmplugin.yaml and images.txt.
	Registry string
	// Module is the wasm filter (the committed wasm/kvgate.wasm).
	Module []byte
	// Log receives one line per step; nil: none.
	Log io.Writer
}

// Result is what Build wrote.
type Result struct {
	// FilterDigest and SidecarDigest are the images' digests
	// ("sha256:…"): the filter's manifest, the sidecar's index.
	FilterDigest, SidecarDigest string
}

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// Build writes the release into o.Out.
func Build(ctx context.Context, o Options) (*Result, error) {
	if !versionRE.MatchString(o.Version) {
		return nil, fmt.Errorf("release: version %q: want vMAJOR.MINOR.PATCH", o.Version)
	}
	if len(o.Module) == 0 || o.Root == "" || o.Out == "" || o.Registry == "" {
		return nil, errors.New("release: Module, Root, Out and Registry are required")
	}
	if entries, err := os.ReadDir(o.Out); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("release: %s is not empty", o.Out)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	res := &Result{}

	// Binaries.
	for _, p := range CLIPlatforms {
		name := fmt.Sprintf("kvhints-%s-%s", p.OS, p.Architecture)
		logf("build %s", name)
		if err := goBuild(ctx, o, "./cmd/kvhints", p, filepath.Join(o.Out, name)); err != nil {
			return nil, err
		}
	}
	sidecars := map[string]string{}
	for _, p := range SidecarPlatforms {
		name := fmt.Sprintf("kvgate-sidecar-%s-%s", p.OS, p.Architecture)
		logf("build %s", name)
		sidecars[p.Architecture] = filepath.Join(o.Out, name)
		if err := goBuild(ctx, o, "./cmd/sidecar", p, sidecars[p.Architecture]); err != nil {
			return nil, err
		}
	}

	// The filter image: one writer for it, filterimage (go-containerregistry),
	// which the committed WasmPlugin's digest is checked against.
	filterDigest, err := filterimage.Write(filepath.Join(o.Out, "kvgate-filter"), o.Module, o.Version)
	if err != nil {
		return nil, err
	}
	res.FilterDigest = filterDigest
	logf("kvgate-filter %s", filterDigest)
	if err := os.WriteFile(filepath.Join(o.Out, "kvgate.wasm"), o.Module, 0o644); err != nil {
		return nil, err
	}

	// The native modules, beside the wasm one (their checksums in SHA256SUMS).
	for _, m := range NativeModules {
		logf("build %s", m.File)
		if err := nativeBuild(ctx, o, m, filepath.Join(o.Out, m.File)); err != nil {
			return nil, err
		}
	}

	// The sidecar image.
	idx, err := sidecarIndex(o, sidecars)
	if err != nil {
		return nil, err
	}
	lp, err := layout.Write(filepath.Join(o.Out, "kvgate-sidecar"), empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Version})); err != nil {
		return nil, err
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	res.SidecarDigest = d.String()
	logf("kvgate-sidecar %s", res.SidecarDigest)

	// The WasmPlugin, images.txt, SHA256SUMS.
	wp, err := os.ReadFile(filepath.Join(o.Root, "envoy", "istio", "wasmplugin.yaml"))
	if err != nil {
		return nil, err
	}
	wp, err = WasmPlugin(wp, "oci://"+o.Registry+"/kvgate-filter:"+o.Version, strings.TrimPrefix(res.FilterDigest, "sha256:"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "wasmplugin.yaml"), wp, 0o644); err != nil {
		return nil, err
	}
	images := fmt.Sprintf("%s/kvgate-filter:%s %s\n%s/kvgate-sidecar:%s %s\n",
		o.Registry, o.Version, res.FilterDigest, o.Registry, o.Version, res.SidecarDigest)
	if err := os.WriteFile(filepath.Join(o.Out, "images.txt"), []byte(images), 0o644); err != nil {
		return nil, err
	}
	if err := writeSums(o.Out); err != nil {
		return nil, err
	}
	return res, nil
}

// A Native is one build of the native Envoy dynamic module: the file the
// release names it, its GOARCH and the C compiler cgo builds it with.
// Envoy's filter loads it by file name (envoy/envoy-native.yaml), or as
// lib<name>.so from $ENVOY_DYNAMIC_MODULES_SEARCH_PATH once renamed
// libkvgate.so.
type Native struct {
	File, Arch, CC string
}

// NativeModules are the release's native modules: linux/amd64 with the
// system gcc, linux/arm64 with Debian's cross compiler
// (gcc-aarch64-linux-gnu, which make release installs when it is missing).
var NativeModules = []Native{
	{File: "libkvgate-linux-amd64.so", Arch: "amd64", CC: "gcc"},
	{File: "libkvgate-linux-arm64.so", Arch: "arm64", CC: "aarch64-linux-gnu-gcc"},
}

// nativeBuild builds envoy/native/libkvgate for m as a C shared library,
// reproducibly: -trimpath, no build ID, no symbol table, fixed GOAMD64 and
// GOARM64, and cgo's C compiled with m.CC (the same compiler gives the
// same bytes).
func nativeBuild(ctx context.Context, o Options, m Native, out string) error {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Errorf("release: the native modules are built on linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath(m.CC); err != nil {
		return fmt.Errorf("release: %s needs the C compiler %s (make release installs it): %v", m.File, m.CC, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared",
		"-ldflags", "-s -w -buildid=", "-o", out, "./envoy/native/libkvgate")
	cmd.Dir = o.Root
	env := []string{"CGO_ENABLED=1", "GOOS=linux", "GOARCH=" + m.Arch, "CC=" + m.CC, "GOFLAGS=-buildvcs=false",
		"GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOWORK=off", "CGO_CFLAGS=-O2 -g0"}
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "CC", "GOFLAGS", "GOAMD64", "GOARM64", "GOEXPERIMENT", "GOWORK", "CGO_CFLAGS":
			continue
		}
		env = append(env, e)
	}
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -buildmode=c-shared ./envoy/native/libkvgate (%s): %v\n%s", m.Arch, err, b)
	}
	// go build writes the cgo export header beside the library.
	return os.Remove(strings.TrimSuffix(out, ".so") + ".h")
}

// goBuild builds pkg of the main module for one platform, reproducibly.
func goBuild(ctx context.Context, o Options, pkg string, p v1.Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		// The version and the revision the binaries print for -version and
		// export as kvgate_build_info (-buildvcs=false leaves the build
		// info without a revision, so it is set here).
		"-ldflags", "-s -w -buildid= -X github.com/kvgate/kvgate/internal/version.Version="+o.Version+
			" -X github.com/kvgate/kvgate/internal/version.Revision="+o.Revision,
		"-o", out, pkg)
	cmd.Dir = o.Root
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture, "GOFLAGS=-buildvcs=false",
		"GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOWORK=off"}
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOFLAGS", "GOAMD64", "GOARM64", "GOEXPERIMENT", "GOWORK":
			continue
		}
		env = append(env, e)
	}
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %v\n%s", pkg, p.OS, p.Architecture, err, b)
	}
	return nil
}

// sidecarIndex builds the multi-arch image index of the sidecar binaries.
func sidecarIndex(o Options, binaries map[string]string) (v1.ImageIndex, error) {
	labels := map[string]string{
		"org.opencontainers.image.title":       "kvgate-sidecar",
		"org.opencontainers.image.description": "kvgate: the kv_hints admission filter as a reverse proxy in front of an OpenAI-compatible LLM worker",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Epoch.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://github.com/kvgate/kvgate",
	}
	var adds []mutate.IndexAddendum
	for _, p := range SidecarPlatforms {
		bin, err := os.ReadFile(binaries[p.Architecture])
		if err != nil {
			return nil, err
		}
		gz, err := Gzip(SidecarTar(bin, o.Epoch))
		if err != nil {
			return nil, err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil },
			tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: o.Epoch}, CreatedBy: "make release VERSION=" + o.Version, Comment: "kvgate-sidecar, a static binary"}})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Architecture, cf.OS, cf.Variant = p.Architecture, p.OS, p.Variant
		cf.Created = v1.Time{Time: o.Epoch}
		cf.Config = v1.Config{
			User:         fmt.Sprintf("%d:%d", UID, GID),
			Entrypoint:   Entrypoint,
			Env:          []string{"PATH=/usr/local/bin", "HOME=/home/nonroot"},
			WorkingDir:   "/",
			ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9090/tcp": {}},
			Labels:       labels,
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		img = mutate.Annotations(img, labels).(v1.Image)
		plat := p
		adds = append(adds, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: &plat}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// plainImage is an image that is not an artifact: go-containerregistry
// would otherwise give its index entry an artifactType (the config's media
// type), which marks an artifact, not a runnable image.
type plainImage struct{ v1.Image }

// ArtifactType implements go-containerregistry's partial.withArtifactType.
func (plainImage) ArtifactType() (string, error) { return "", nil }

// SidecarTar is the sidecar image's one layer: the binary, a passwd and
// group naming the non-root user, its home, a writable /tmp, and the
// compile cache directory. No shell, no libraries (the binary is static),
// no CA bundle (mount one and set SSL_CERT_FILE for an https:// upstream).
// Entries are sorted; every one is dated epoch.
func SidecarTar(binary []byte, epoch time.Time) []byte {
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	entries := []entry{
		{"etc/", 0o755, 0, 0, nil},
		{"etc/group", 0o644, 0, 0, []byte(group)},
		{"etc/passwd", 0o644, 0, 0, []byte(passwd)},
		{"home/", 0o755, 0, 0, nil},
		{"home/nonroot/", 0o700, UID, GID, nil},
		{"tmp/", 0o1777, 0, 0, nil},
		{"usr/", 0o755, 0, 0, nil},
		{"usr/local/", 0o755, 0, 0, nil},
		{"usr/local/bin/", 0o755, 0, 0, nil},
		{strings.TrimPrefix(SidecarBinary, "/"), 0o755, 0, 0, binary},
		{"var/", 0o755, 0, 0, nil},
		{"var/cache/", 0o755, 0, 0, nil},
		{strings.TrimPrefix(CacheDir, "/") + "/", 0o755, UID, GID, nil},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch.UTC(), Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(e.data)
	}
	_ = tw.Close()
	return b.Bytes()
}

// Gzip compresses b with an empty header (no name, no time).
func Gzip(b []byte) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var (
	urlLine    = regexp.MustCompile(`(?m)^  url: \S+$`)
	digestLine = regexp.MustCompile(`(?m)^  sha256: [0-9a-f]{64}$`)
)

// WasmPlugin returns the committed WasmPlugin manifest with the image URL
// and digest of a release.
func WasmPlugin(committed []byte, url, sha string) ([]byte, error) {
	if len(urlLine.FindAll(committed, -1)) != 1 || len(digestLine.FindAll(committed, -1)) != 1 {
		return nil, errors.New("release: envoy/istio/wasmplugin.yaml: want exactly one `  url:` and one `  sha256:` line")
	}
	out := urlLine.ReplaceAll(committed, []byte("  url: "+url))
	return digestLine.ReplaceAll(out, []byte("  sha256: "+sha)), nil
}

// writeSums writes SHA256SUMS for the regular files directly in dir.
func writeSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() || e.Name() == "SHA256SUMS" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		s := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(s[:]), path.Base(e.Name()))
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
