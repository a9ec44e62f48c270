package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/protobuf/encoding/protojson"
	extensions "istio.io/api/extensions/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/kvgate/kvgate/deploy/internal/filterimage"
	"github.com/kvgate/kvgate/deploy/internal/series"
	"github.com/kvgate/kvgate/internal/repo"
	"github.com/kvgate/kvgate/wasm"
)

const version = "v0.1.0"

// epoch is fixed, as SOURCE_DATE_EPOCH would be for one commit.
var epoch = time.Unix(1767225600, 0).UTC()

func TestMain(m *testing.M) {
	code := m.Run()
	series.Cleanup()
	os.Exit(code)
}

// TestReleaseReproducible builds the release twice into fresh directories
// and requires the same bytes for every file, then checks what was built.
func TestReleaseReproducible(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	build := func(dir string) *Result {
		t.Helper()
		res, err := Build(context.Background(), Options{Version: version, Out: dir, Root: root, Epoch: epoch,
			Revision: "0123456789abcdef0123456789abcdef01234567", Registry: "ghcr.io/kvgate", Module: wasm.Module})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := filepath.Join(t.TempDir(), "dist"), filepath.Join(t.TempDir(), "dist")
	ra, rb := build(a), build(b)
	if *ra != *rb {
		t.Errorf("digests differ: %+v and %+v", ra, rb)
	}
	ha, hb := tree(t, a), tree(t, b)
	if !reflect.DeepEqual(ha, hb) {
		for p, h := range ha {
			if hb[p] != h {
				t.Errorf("%s differs between the two builds", p)
			}
		}
		for p := range hb {
			if _, ok := ha[p]; !ok {
				t.Errorf("%s only in the second build", p)
			}
		}
		t.FailNow()
	}
	t.Logf("%d files identical; filter %s, sidecar %s", len(ha), ra.FilterDigest, ra.SidecarDigest)

	t.Run("SHA256SUMS", func(t *testing.T) { checkSums(t, a) })
	t.Run("filter", func(t *testing.T) { checkFilter(t, a, ra) })
	t.Run("WasmPlugin", func(t *testing.T) { checkWasmPlugin(t, a, ra) })
	t.Run("sidecar", func(t *testing.T) { checkSidecar(t, a, ra) })
	t.Run("kvhints", func(t *testing.T) { checkCLI(t, a) })
	t.Run("native", func(t *testing.T) { checkNative(t, a) })
}

// checkNative: each native module is an ELF shared object for its machine
// that exports the dynamic-module hooks Envoy looks up, and loads and
// answers Envoy's first call as the amd64 build does (checkNativeLoads).
func checkNative(t *testing.T, dir string) {
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	answers := map[string][2]string{}
	for _, m := range NativeModules {
		f, err := elf.Open(filepath.Join(dir, m.File))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Type != elf.ET_DYN || f.Machine != machines[m.Arch] {
			t.Errorf("%s: type %v machine %v, want a shared object for %v", m.File, f.Type, f.Machine, machines[m.Arch])
		}
		syms, err := f.DynamicSymbols()
		if err != nil {
			t.Fatal(err)
		}
		exported := map[string]bool{}
		var callbacks []string
		for _, s := range syms {
			switch {
			case s.Section != elf.SHN_UNDEF:
				exported[s.Name] = true
			case strings.HasPrefix(s.Name, "envoy_dynamic_module_callback_"):
				if elf.ST_BIND(s.Info) != elf.STB_WEAK {
					t.Errorf("%s: the callback %s is not weak: the module would not load into an Envoy without it", m.File, s.Name)
				}
				callbacks = append(callbacks, s.Name)
			}
		}
		for _, name := range []string{"envoy_dynamic_module_on_program_init", "envoy_dynamic_module_on_http_filter_config_new",
			"envoy_dynamic_module_on_http_filter_new", "envoy_dynamic_module_on_http_filter_request_body"} {
			if !exported[name] {
				t.Errorf("%s does not export %s", m.File, name)
			}
		}
		if len(callbacks) == 0 {
			t.Errorf("%s imports no Envoy callbacks", m.File)
		}
		if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(m.File, ".so")+".h")); err == nil {
			t.Errorf("the cgo export header of %s was left in the release", m.File)
		}
		answers[m.Arch] = checkNativeLoads(t, filepath.Join(dir, m.File), m, callbacks)
	}
	want := answers["amd64"]
	if !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(want[0]) {
		t.Errorf("the amd64 module, with Envoy's callbacks: %q, want its ABI version", want[0])
	}
	if !strings.HasPrefix(want[1], "refused\nkvgate: this Envoy does not provide the dynamic-module callback envoy_dynamic_module_callback_") {
		t.Errorf("the amd64 module, without Envoy's callbacks: %q, want it refused, naming the one missing", want[1])
	}
	for arch, got := range answers {
		if got != want {
			t.Errorf("the %s module answered %q, the amd64 one %q", arch, got, want)
		}
	}
}

// loaderC is a program that loads a module as Envoy does (dlopen, then
// envoy_dynamic_module_on_program_init) and prints the ABI version it
// returns, or "refused". Where %s stands go Envoy's callbacks: stubs
// exported with -rdynamic (the call only checks that they are there), or
// nothing, as in an Envoy without them.
const loaderC = `#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
%s
int main(int argc, char **argv) {
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) { fprintf(stderr, "dlopen: %%s\n", dlerror()); return 2; }
	const char *(*init)(void) = (const char *(*)(void))dlsym(h, "envoy_dynamic_module_on_program_init");
	if (!init) { fprintf(stderr, "dlsym: %%s\n", dlerror()); return 3; }
	const char *v = init();
	printf("%%s\n", v ? v : "refused");
	return 0;
}
`

// checkNativeLoads loads module, built for m.Arch, in a program built with
// m.CC (an arm64 one runs under qemu-user, which make test installs), with
// Envoy's callbacks and without them, and returns the two answers: the ABI
// version, and "refused" followed by what the module wrote to stderr.
func checkNativeLoads(t *testing.T, module string, m Native, callbacks []string) [2]string {
	t.Helper()
	var run []string
	if m.Arch != runtime.GOARCH {
		qemu, err := exec.LookPath("qemu-aarch64-static")
		if err != nil {
			t.Fatalf("%s: qemu-aarch64-static runs the arm64 module here (make test installs qemu-user-static): %v", m.File, err)
		}
		run = []string{qemu, "-L", "/usr/aarch64-linux-gnu"}
	}
	var stubs strings.Builder
	for _, c := range callbacks {
		fmt.Fprintf(&stubs, "void %s(void) { abort(); }\n", c)
	}
	var got [2]string
	for i, with := range []string{stubs.String(), ""} {
		src := filepath.Join(t.TempDir(), "loader.c")
		if err := os.WriteFile(src, []byte(fmt.Sprintf(loaderC, with)), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := strings.TrimSuffix(src, ".c")
		if b, err := exec.Command(m.CC, "-rdynamic", "-o", bin, src, "-ldl").CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", m.CC, src, err, b)
		}
		args := append(slices.Clone(run), bin, module)
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s loading %s: %v\n%s%s", strings.Join(args, " "), m.File, err, stdout.Bytes(), stderr.Bytes())
		}
		got[i] = strings.TrimSpace(stdout.String() + stderr.String())
	}
	return got
}

// tree maps every file under dir to its SHA-256.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(s[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSums(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	h := tree(t, dir)
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || h[name] != sum {
			t.Errorf("SHA256SUMS line %q does not match %s", line, h[name])
		}
		listed = append(listed, name)
	}
	want := []string{"images.txt", "kvgate-sidecar-linux-amd64", "kvgate-sidecar-linux-arm64", "kvgate.wasm",
		"kvhints-darwin-amd64", "kvhints-darwin-arm64", "kvhints-linux-amd64", "kvhints-linux-arm64", "libkvgate-linux-amd64.so", "libkvgate-linux-arm64.so", "wasmplugin.yaml"}
	if !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %v, want %v", listed, want)
	}
}

// index reads an OCI layout's index.json and returns its one entry, named
// by the version.
func index(t *testing.T, dir string) (layout.Path, v1.Descriptor) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("%s/index.json: %+v, want one entry tagged %s", dir, im.Manifests, version)
	}
	return p, im.Manifests[0]
}

// checkFilter reads the filter image the way Istio's image fetcher does
// (pkg/wasm/imagefetcher.go, the compat variant it tries first): one layer
// of media type application/vnd.oci.image.layer.v1.tar+gzip, a gzip tar
// holding plugin.wasm, and the manifest digest as the WasmPlugin's sha256.
func checkFilter(t *testing.T, dir string, res *Result) {
	p, desc := index(t, filepath.Join(dir, "kvgate-filter"))
	if desc.MediaType != types.OCIManifestSchema1 || desc.Digest.String() != res.FilterDigest {
		t.Fatalf("entry %+v", desc)
	}
	img, err := p.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != res.FilterDigest {
		t.Errorf("image digest %s", d)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Annotations[filterimage.AnnotationVariant] != "compat" || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %+v: want the compat variant", m)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s", mt)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := untar(t, rc)
	if !bytes.Equal(files[filterimage.ModuleFile], wasm.Module) || len(files) != 1 {
		t.Errorf("layer holds %d files; plugin.wasm is the committed module: %v", len(files), bytes.Equal(files[filterimage.ModuleFile], wasm.Module))
	}
	// Layers() validated the config's diff_ids against the layer.
	cf, err := img.ConfigFile()
	if err != nil || len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("config %+v %v", cf, err)
	}
	if diff, _ := layers[0].DiffID(); diff != cf.RootFS.DiffIDs[0] {
		t.Errorf("diff_id %s, config says %s", diff, cf.RootFS.DiffIDs[0])
	}
	// The same digest as the committed WasmPlugin's, which envoy/ checks.
	committed, err := os.ReadFile(filepath.Join("..", "..", "..", "envoy", "istio", "wasmplugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(committed), "  sha256: "+strings.TrimPrefix(res.FilterDigest, "sha256:")+"\n") {
		t.Errorf("envoy/istio/wasmplugin.yaml does not have the release's filter digest %s", res.FilterDigest)
	}
}

// untar reads a gzip tar into a map of regular files.
func untar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func checkWasmPlugin(t *testing.T, dir string, res *Result) {
	b, err := os.ReadFile(filepath.Join(dir, "wasmplugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := regexp.MustCompile(`(?m)^---$`).Split(string(b), -1)
	j, err := yaml.YAMLToJSON([]byte(docs[0]))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(j, &obj); err != nil || obj.Kind != "WasmPlugin" {
		t.Fatalf("first document: %v %s", err, obj.Kind)
	}
	wp := &extensions.WasmPlugin{}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(obj.Spec, wp); err != nil {
		t.Fatal(err)
	}
	if wp.GetUrl() != "oci://ghcr.io/kvgate/kvgate-filter:"+version || "sha256:"+wp.GetSha256() != res.FilterDigest {
		t.Errorf("url %s sha256 %s, want the release's image %s", wp.GetUrl(), wp.GetSha256(), res.FilterDigest)
	}
}

func checkSidecar(t *testing.T, dir string, res *Result) {
	p, desc := index(t, filepath.Join(dir, "kvgate-sidecar"))
	if desc.MediaType != types.OCIImageIndex || desc.Digest.String() != res.SidecarDigest {
		t.Fatalf("entry %+v, want the multi-arch index", desc)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ii.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(SidecarPlatforms) {
		t.Fatalf("%d platforms", len(im.Manifests))
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for i, m := range im.Manifests {
		want := SidecarPlatforms[i]
		if m.Platform == nil || !m.Platform.Equals(want) || m.ArtifactType != "" {
			t.Errorf("manifest %d: platform %+v artifactType %q, want %+v and none", i, m.Platform, m.ArtifactType, want)
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != want.OS || cf.Architecture != want.Architecture || !cf.Created.Time.Equal(epoch) {
			t.Errorf("%s: config os %s arch %s created %v", want.Architecture, cf.OS, cf.Architecture, cf.Created)
		}
		if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, Entrypoint) || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: user %q entrypoint %q cmd %q", want.Architecture, cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if cf.Config.Labels["org.opencontainers.image.version"] != version {
			t.Errorf("%s: labels %v", want.Architecture, cf.Config.Labels)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers %v", want.Architecture, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		entries := tarEntries(t, rc)
		rc.Close()
		for _, e := range entries {
			if !e.ModTime.Equal(epoch) {
				t.Errorf("%s: %s dated %v", want.Architecture, e.Name, e.ModTime)
			}
			if strings.HasSuffix(e.Name, "/sh") || strings.Contains(e.Name, "busybox") || strings.HasPrefix(e.Name, "bin/") {
				t.Errorf("%s: %s in the image: no shell", want.Architecture, e.Name)
			}
		}
		cache := entries[strings.TrimPrefix(CacheDir, "/")+"/"]
		if cache == nil || cache.Uid != UID {
			t.Errorf("%s: %s not owned by %d", want.Architecture, CacheDir, UID)
		}
		bin := entries[strings.TrimPrefix(SidecarBinary, "/")]
		if bin == nil || bin.Mode&0o111 == 0 {
			t.Fatalf("%s: no executable %s", want.Architecture, SidecarBinary)
		}
		plain, err := os.ReadFile(filepath.Join(dir, "kvgate-sidecar-linux-"+want.Architecture))
		if err != nil || !bytes.Equal(plain, bin.data) {
			t.Errorf("%s: the image's binary is not dist's kvgate-sidecar-linux-%s", want.Architecture, want.Architecture)
		}
		checkStatic(t, want.Architecture, bin.data, machines[want.Architecture])
		if want.Architecture == runtime.GOARCH && runtime.GOOS == "linux" {
			runImageBinary(t, bin.data, cf.Config.Entrypoint)
		}
	}
}

type tarEntry struct {
	*tar.Header
	data []byte
}

func tarEntries(t *testing.T, r io.Reader) map[string]*tarEntry {
	t.Helper()
	out := map[string]*tarEntry{}
	order := []string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = &tarEntry{h, b}
		order = append(order, h.Name)
	}
	if !slices.IsSorted(order) {
		t.Errorf("tar entries not sorted: %v", order)
	}
	return out
}

// checkStatic: an ELF binary for the machine with no interpreter and no
// shared libraries, so it runs in an image with nothing else.
func checkStatic(t *testing.T, what string, b []byte, machine elf.Machine) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s: machine %v, want %v", what, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has an ELF interpreter: not static", what)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs %v", what, libs)
	}
}

// runImageBinary runs the image's binary as the image would (its
// entrypoint arguments, then loopback listeners and a worker), sends a
// request with a hint and checks what the worker received.
func runImageBinary(t *testing.T, bin []byte, entrypoint []string) {
	path := filepath.Join(t.TempDir(), "kvgate-sidecar")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []byte
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	defer worker.Close()
	// -version prints what make release linked in.
	if out, err := exec.Command(path, "-version").Output(); err != nil ||
		!strings.Contains(string(out), version) || !strings.Contains(string(out), "0123456789abcdef0123456789abcdef01234567") {
		t.Errorf("-version: %q %v, want the release %s and its revision", out, err, version)
	}
	s := series.StartSidecar(t, path, worker.URL, entrypoint[1:]...)
	resp, err := http.Post(s.API+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[],"kv_hints":{"protocol_version":"0.1","actions":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != http.StatusOK || string(got) != `{"model":"m","messages":[]}` {
		t.Errorf("status %d, the worker received %q: want the hint removed", resp.StatusCode, got)
	}
	if code, _, err := series.Get(s.Admin + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz: %d %v", code, err)
	}
}

func checkCLI(t *testing.T, dir string) {
	for _, p := range CLIPlatforms {
		name := "kvhints-" + p.OS + "-" + p.Architecture
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch p.OS {
		case "linux":
			checkStatic(t, name, b, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture])
		case "darwin":
			f, err := macho.NewFile(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Architecture]; f.Cpu != want {
				t.Errorf("%s: cpu %v", name, f.Cpu)
			}
			f.Close()
		}
		if p.OS == runtime.GOOS && p.Architecture == runtime.GOARCH {
			env := filepath.Join(t.TempDir(), "envelope.json")
			if err := os.WriteFile(env, []byte(`{"protocol_version":"0.1"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := exec.Command(filepath.Join(dir, name), "check", env).Output()
			var v struct {
				Admitted *bool   `json:"admitted"`
				Reason   *string `json:"reason"`
			}
			if err := json.Unmarshal(out, &v); err != nil || v.Admitted == nil {
				t.Errorf("%s check: %q %v", name, out, err)
			}
		}
	}
}
