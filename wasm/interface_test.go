package wasm

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// docSection returns the names in the first indented block of the
// section of filter/abi's package documentation under heading.
func docSection(t *testing.T, heading string) []string {
	t.Helper()
	doc, err := os.ReadFile("../filter/abi/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(doc), "// # "+heading+"\n")
	if !ok {
		t.Fatalf("filter/abi/doc.go has no section %q", heading)
	}
	text, _, _ = strings.Cut(text, "// # ")
	var names []string
	block := false
	for _, line := range strings.Split(text, "\n") {
		if item, ok := strings.CutPrefix(line, "//\t"); ok {
			block = true
			for _, name := range strings.Split(item, ",") {
				names = append(names, strings.TrimSpace(name))
			}
		} else if block {
			break
		}
	}
	if len(names) == 0 {
		t.Fatalf("filter/abi/doc.go, section %q, lists no names", heading)
	}
	slices.Sort(names)
	return names
}

// TestModuleInterface holds the built module to the interface filter/abi
// documents: the proxy-wasm callbacks it exports and the host functions it
// imports from "env", no more and no fewer. A callback exported for
// nothing costs a transition into the VM on every request in Envoy (every
// chunk of a streamed response, for the response callbacks).
func TestModuleInterface(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	m, err := r.CompileModule(ctx, Module)
	if err != nil {
		t.Fatal(err)
	}
	var exported, imported []string
	for name := range m.ExportedFunctions() {
		if strings.HasPrefix(name, "proxy_") {
			exported = append(exported, name)
		}
	}
	for _, f := range m.ImportedFunctions() {
		if mod, name, _ := f.Import(); mod == "env" {
			imported = append(imported, name)
		}
	}
	slices.Sort(exported)
	slices.Sort(imported)
	if want := docSection(t, "Callbacks exported"); !slices.Equal(exported, want) {
		t.Errorf("the module exports %q;\nfilter/abi/doc.go documents %q", exported, want)
	}
	if want := docSection(t, "Host functions imported"); !slices.Equal(imported, want) {
		t.Errorf("the module imports %q from env;\nfilter/abi/doc.go documents %q", imported, want)
	}
	for _, name := range []string{"proxy_on_response_headers", "proxy_on_response_body", "proxy_on_response_trailers", "proxy_on_done"} {
		if slices.Contains(exported, name) {
			t.Errorf("the module exports %s, which it has no use for", name)
		}
	}
}
