package wasm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// withStartSection returns a copy of a wasm module with a start section
// that calls its exported "_initialize" function. Test use only: the
// proxy-wasm-go-sdk proxytest runner instantiates modules without calling
// _initialize, which a Go c-shared (reactor) module needs before any other
// export; a start section makes the runtime call it during instantiation.
// The shipped module is never changed.
//
// Binary format (WebAssembly core spec, section 5.5): the 8-byte header
// (magic "\0asm", version 1), then sections, each an id byte, a LEB128 u32
// content size and the content. Non-custom sections appear at most once and
// in a fixed order: type 1, import 2, function 3, table 4, memory 5, tag 13,
// global 6, export 7, start 8, element 9, data count 12, code 10, data 11.
// Custom sections (id 0) may appear anywhere. So a start section placed
// right after the export section is always in order.
//
// The export section holds a LEB128 count of exports, each a name (LEB128
// length and bytes), a kind byte (0 = function) and a LEB128 index. The
// start section's content is the LEB128 function index.
func withStartSection(mod []byte) ([]byte, error) {
	if len(mod) < 8 || !bytes.Equal(mod[:8], []byte("\x00asm\x01\x00\x00\x00")) {
		return nil, errors.New("not a wasm 1.0 module")
	}
	var exportEnd = -1
	var initIdx uint32
	found := false
	for i := 8; i < len(mod); {
		id := mod[i]
		size, n, err := uleb(mod[i+1:])
		if err != nil {
			return nil, err
		}
		start := i + 1 + n
		end := start + int(size)
		if end > len(mod) {
			return nil, errors.New("section overruns module")
		}
		switch id {
		case 8:
			return nil, errors.New("module already has a start section")
		case 7:
			exportEnd = end
			idx, ok, err := findFuncExport(mod[start:end], "_initialize")
			if err != nil {
				return nil, err
			}
			initIdx, found = idx, ok
		}
		i = end
	}
	if exportEnd < 0 || !found {
		return nil, errors.New("no exported _initialize function")
	}
	content := appendULEB(nil, initIdx)
	sec := append([]byte{8}, appendULEB(nil, uint32(len(content)))...)
	sec = append(sec, content...)
	out := make([]byte, 0, len(mod)+len(sec))
	out = append(out, mod[:exportEnd]...)
	out = append(out, sec...)
	return append(out, mod[exportEnd:]...), nil
}

// findFuncExport returns the function index exported under name.
func findFuncExport(sec []byte, name string) (uint32, bool, error) {
	count, n, err := uleb(sec)
	if err != nil {
		return 0, false, err
	}
	p := n
	for k := uint32(0); k < count; k++ {
		l, n, err := uleb(sec[p:])
		if err != nil {
			return 0, false, err
		}
		p += n
		if p+int(l)+1 > len(sec) {
			return 0, false, errors.New("export entry overruns section")
		}
		nm := string(sec[p : p+int(l)])
		p += int(l)
		kind := sec[p]
		p++
		idx, n, err := uleb(sec[p:])
		if err != nil {
			return 0, false, err
		}
		p += n
		if kind == 0 && nm == name {
			return idx, true, nil
		}
	}
	return 0, false, nil
}

// uleb decodes an unsigned LEB128 u32, returning it and its length.
func uleb(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5 && i < len(b); i++ {
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("bad LEB128")
}

func appendULEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func TestWithStartSection(t *testing.T) {
	// A minimal module: type () -> (), one function, exported as _initialize.
	mini := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type section
		"\x03\x02\x01\x00" + // function section
		"\x07\x0f\x01\x0b_initialize\x00\x00" + // export section
		"\x0a\x04\x01\x02\x00\x0b") // code section
	got, err := withStartSection(mini)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, mini[:8+6+4+17]...), 8, 1, 0), mini[8+6+4+17:]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	if _, err := withStartSection(got); err == nil {
		t.Fatal("second start section accepted")
	}
	if _, err := withStartSection(mini[:20]); err == nil {
		t.Fatal("truncated module accepted")
	}
	for _, v := range []uint32{0, 1, 127, 128, 1451, 1<<32 - 1} {
		if d, _, err := uleb(appendULEB(nil, v)); err != nil || d != v {
			t.Errorf("LEB128 %d -> %d %v", v, d, err)
		}
	}
	// The real module gets exactly one extra section.
	m, err := withStartSection(Module)
	if err != nil {
		t.Fatal(err)
	}
	if len(m)-len(Module) < 3 || len(m)-len(Module) > 7 {
		t.Fatal(fmt.Sprint("grew by ", len(m)-len(Module)))
	}
}
