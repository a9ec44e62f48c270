package proxywasm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// The example of the package documentation, byte for byte.
var docExample = []byte{
	2, 0, 0, 0,
	1, 0, 0, 0, 1, 0, 0, 0,
	2, 0, 0, 0, 0, 0, 0, 0,
	'a', 0, '1', 0,
	'b', 'c', 0, 0,
}

func TestEncodeHeaderMap(t *testing.T) {
	for _, c := range []struct {
		name  string
		pairs [][2]string
		want  []byte
	}{
		{"empty", nil, []byte{0, 0, 0, 0}},
		{"doc example", [][2]string{{"a", "1"}, {"bc", ""}}, docExample},
		{"empty key and value", [][2]string{{"", ""}}, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"repeated key", [][2]string{{"k", "x"}, {"k", "y"}},
			[]byte{2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'k', 0, 'x', 0, 'k', 0, 'y', 0}},
		{"u32 sizes little-endian", [][2]string{{string(make([]byte, 258)), ""}},
			append([]byte{1, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0}, append(make([]byte, 258), 0, 0)...)},
	} {
		got := EncodeHeaderMap(c.pairs)
		if !bytes.Equal(got, c.want) || len(got) != cap(got) || HeaderMapSize(c.pairs) != len(c.want) {
			t.Errorf("%s: EncodeHeaderMap = %v (cap %d), size %d; want %v", c.name, got, cap(got), HeaderMapSize(c.pairs), c.want)
		}
		if got := AppendHeaderMap([]byte("pre"), c.pairs); !bytes.Equal(got, append([]byte("pre"), c.want...)) {
			t.Errorf("%s: AppendHeaderMap = %v", c.name, got)
		}
	}
}

func TestDecodeHeaderMap(t *testing.T) {
	for _, c := range []struct {
		name string
		m    []byte
		want [][2]string
		ok   bool
	}{
		{"nil", nil, nil, true},
		{"one NUL", []byte{0}, nil, true},
		{"zero count", []byte{0, 0, 0, 0}, nil, true},
		{"doc example", docExample, [][2]string{{"a", "1"}, {"bc", ""}}, true},
		{"trailing bytes ignored", append(append([]byte(nil), docExample...), 9, 9), [][2]string{{"a", "1"}, {"bc", ""}}, true},
		{"short count", []byte{1}, nil, false},
		{"short count of three", []byte{1, 0, 0}, nil, false},
		{"count without sizes", []byte{1, 0, 0, 0}, nil, false},
		{"huge count", []byte{255, 255, 255, 255, 0, 0, 0, 0}, nil, false},
		{"value past the end", []byte{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 'b'}, nil, false},
		{"key size past the end", []byte{1, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 'a', 0, 0}, nil, false},
		{"sizes that wrap 32 bits", []byte{1, 0, 0, 0, 255, 255, 255, 255, 1, 0, 0, 0, 0, 0}, nil, false},
		{"key without NUL", []byte{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'a', 'x', 'b', 0}, nil, false},
		{"value without NUL", []byte{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 'b', 'x'}, nil, false},
		{"second pair bad", []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0}, nil, false},
	} {
		got, err := DecodeHeaderMap(c.m)
		if (err == nil) != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: DecodeHeaderMap(%v) = %q, %v", c.name, c.m, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadHeaderMap) {
			t.Errorf("%s: error %v is not ErrBadHeaderMap", c.name, err)
		}
		var seen [][2]string
		ferr := ForEachHeader(c.m, func(k, v []byte) { seen = append(seen, [2]string{string(k), string(v)}) })
		if (ferr == nil) != c.ok || c.ok && !reflect.DeepEqual(seen, c.want) {
			t.Errorf("%s: ForEachHeader saw %q, %v", c.name, seen, ferr)
		}
	}
}

// ForEachHeader hands out slices of the map itself: the guest reads
// headers without copying them.
func TestForEachHeaderAliases(t *testing.T) {
	m := EncodeHeaderMap([][2]string{{"k", "v"}})
	_ = ForEachHeader(m, func(k, v []byte) {
		if &k[0] != &m[12] || &v[0] != &m[14] || cap(k) != len(m)-12 {
			t.Fatal("slices do not alias the map")
		}
	})
}

// FuzzHeaderMap: decoding arbitrary bytes never panics or reads outside
// them, agrees with ForEachHeader, and re-encodes to a prefix of the input
// (modulo the empty-map spellings); encoding arbitrary pairs decodes back
// to them.
func FuzzHeaderMap(f *testing.F) {
	f.Add(docExample, "k", "v", 1)
	f.Add([]byte{0}, "", "", 0)
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0}, "\x00", "a\x00b", 3)
	f.Add(EncodeHeaderMap([][2]string{{":path", "/v1/chat/completions"}, {"content-length", "12"}}), ":method", "POST", 2)
	f.Fuzz(func(t *testing.T, m []byte, key, value string, n int) {
		// Decoding: only m's own bytes are read (a copy with no spare
		// capacity makes any read past it a panic).
		in := append(make([]byte, 0, len(m)), m...)
		pairs, err := DecodeHeaderMap(in)
		var seen [][2]string
		ferr := ForEachHeader(in, func(k, v []byte) { seen = append(seen, [2]string{string(k), string(v)}) })
		if (err == nil) != (ferr == nil) {
			t.Fatalf("DecodeHeaderMap: %v, ForEachHeader: %v", err, ferr)
		}
		if err == nil {
			if !reflect.DeepEqual(pairs, seen) && len(pairs)+len(seen) > 0 {
				t.Fatalf("DecodeHeaderMap %q, ForEachHeader %q", pairs, seen)
			}
			enc := EncodeHeaderMap(pairs)
			switch {
			case len(pairs) == 0 && (len(m) == 0 || len(m) == 1 && m[0] == 0):
			case !bytes.HasPrefix(m, enc):
				t.Fatalf("%v decodes to %q, which encodes to %v", m, pairs, enc)
			}
		}
		// Encoding: decode(encode(x)) == x for any pairs, NULs and
		// empty strings included.
		n = n & 7
		x := make([][2]string, n)
		for i := range x {
			x[i] = [2]string{key[i%(len(key)+1):], value[:len(value)-i%(len(value)+1)]}
		}
		got, err := DecodeHeaderMap(EncodeHeaderMap(x))
		if err != nil || len(got) != n || n > 0 && !reflect.DeepEqual(got, x) {
			t.Fatalf("decode(encode(%q)) = %q, %v", x, got, err)
		}
	})
}
