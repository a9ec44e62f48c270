package proxywasm

import "errors"

// The header map codec. A map is a list of (key, value) pairs, repeated
// keys allowed, encoded as described in the package documentation under
// "Header maps". Pairs are [2]string{key, value}, as in the proxy-wasm Go
// SDKs.

// ErrBadHeaderMap reports an encoded header map that does not follow the
// proxy-wasm format.
var ErrBadHeaderMap = errors.New("malformed proxy-wasm header map")

// HeaderMapSize returns the size of the encoding of pairs.
func HeaderMapSize(pairs [][2]string) int { return mapSize(pairs, stringPair) }

// AppendHeaderMap appends the encoding of pairs to dst and returns the
// extended slice; it grows dst at most once.
func AppendHeaderMap(dst []byte, pairs [][2]string) []byte {
	return AppendHeaderMapOf(dst, pairs, stringPair)
}

func stringPair(p [2]string) (string, string) { return p[0], p[1] }

// AppendHeaderMapOf is AppendHeaderMap for pairs of another type, whose
// key and value kv returns: a host's own header type encodes without a
// conversion.
func AppendHeaderMapOf[P any, S ~string | ~[]byte](dst []byte, pairs []P, kv func(P) (key, value S)) []byte {
	if size := mapSize(pairs, kv); cap(dst)-len(dst) < size {
		b := make([]byte, len(dst), len(dst)+size)
		copy(b, dst)
		dst = b
	}
	dst = appendLE32(dst, uint32(len(pairs)))
	for _, p := range pairs {
		k, v := kv(p)
		dst = appendLE32(dst, uint32(len(k)))
		dst = appendLE32(dst, uint32(len(v)))
	}
	for _, p := range pairs {
		k, v := kv(p)
		dst = append(dst, k...)
		dst = append(dst, 0)
		dst = append(dst, v...)
		dst = append(dst, 0)
	}
	return dst
}

func mapSize[P any, S ~string | ~[]byte](pairs []P, kv func(P) (S, S)) int {
	n := 4
	for _, p := range pairs {
		k, v := kv(p)
		n += 8 + len(k) + 1 + len(v) + 1
	}
	return n
}

// EncodeHeaderMap returns the encoding of pairs, in a slice of exactly its
// size.
func EncodeHeaderMap(pairs [][2]string) []byte {
	return AppendHeaderMap(nil, pairs)
}

// ForEachHeader calls fn for each pair of the encoded map m, in order. The
// slices passed to fn alias m. An empty m, or one NUL byte, is the empty
// map. A malformed m ends the walk with ErrBadHeaderMap, possibly after
// some pairs were passed to fn. Sizes are added in 64 bits, so no u32 in m
// can make an offset wrap around.
func ForEachHeader(m []byte, fn func(key, value []byte)) error {
	n, ok := pairCount(m)
	if !ok {
		return ErrBadHeaderMap
	}
	sizes := m[min(4, len(m)):]
	data := 4 + 8*n
	for i := uint64(0); i < n; i++ {
		ks := uint64(le32(sizes[8*i:]))
		vs := uint64(le32(sizes[8*i+4:]))
		if data+ks+vs+2 > uint64(len(m)) || m[data+ks] != 0 || m[data+ks+1+vs] != 0 {
			return ErrBadHeaderMap
		}
		fn(m[data:data+ks], m[data+ks+1:data+ks+1+vs])
		data += ks + vs + 2
	}
	return nil
}

// DecodeHeaderMap returns the pairs of the encoded map m, copied out of m:
// nil for the empty map, ErrBadHeaderMap for a malformed one.
func DecodeHeaderMap(m []byte) ([][2]string, error) {
	n, ok := pairCount(m)
	if !ok {
		return nil, ErrBadHeaderMap
	}
	if n == 0 {
		return nil, nil
	}
	pairs := make([][2]string, 0, n)
	if err := ForEachHeader(m, func(k, v []byte) { pairs = append(pairs, [2]string{string(k), string(v)}) }); err != nil {
		return nil, err
	}
	return pairs, nil
}

// pairCount returns the pair count of m once m is long enough to hold the
// count and the size fields; the empty map has none.
func pairCount(m []byte) (uint64, bool) {
	if len(m) == 0 || len(m) == 1 && m[0] == 0 {
		return 0, true
	}
	if len(m) < 4 {
		return 0, false
	}
	n := uint64(le32(m))
	return n, 4+8*n <= uint64(len(m))
}

// le32 and appendLE32 read and write the ABI's little-endian u32 fields.
// They stand in for encoding/binary, which would pull reflect into a guest.
func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func appendLE32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}
