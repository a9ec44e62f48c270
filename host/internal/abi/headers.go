package abi

import (
	"context"
	"strings"

	"github.com/kvgate/kvgate/proxywasm"
)

// headerMapFuncs: the request's headers and trailers. Names are stored in
// lower case; keys the guest passes are lowered (or compared ignoring
// ASCII case) before use.
func headerMapFuncs() []hostFunc {
	return []hostFunc{
		fn("proxy_get_header_map_size", ps(2), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			fs, _, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			in.Mem.WriteU32("proxy_get_header_map_size", uint32(s[1]), uint32(proxywasm.HeaderMapSize(*fs)))
			return proxywasm.StatusOK
		}),
		fn("proxy_get_header_map_pairs", ps(3), func(ctx context.Context, in *Instance, s []uint64) proxywasm.Status {
			fs, _, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			in.scratch = proxywasm.AppendHeaderMap(in.scratch[:0], *fs)
			return in.copyOut(ctx, "proxy_get_header_map_pairs", in.scratch, uint32(s[1]), uint32(s[2]))
		}),
		fn("proxy_set_header_map_pairs", ps(3), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			raw := in.Mem.Read("proxy_set_header_map_pairs", uint32(s[1]), uint32(s[2]))
			fs, changed, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			nf, err := proxywasm.DecodeHeaderMap(raw)
			if err != nil {
				return proxywasm.StatusBadArgument
			}
			for i := range nf {
				nf[i][0] = strings.ToLower(nf[i][0])
			}
			*fs, *changed = nf, true
			return proxywasm.StatusOK
		}),
		fn("proxy_get_header_map_value", ps(5), func(ctx context.Context, in *Instance, s []uint64) proxywasm.Status {
			key := in.Mem.Read("proxy_get_header_map_value", uint32(s[1]), uint32(s[2]))
			fs, _, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			for _, f := range *fs {
				if equalFold(f[0], key) {
					return in.copyOut(ctx, "proxy_get_header_map_value", []byte(f[1]), uint32(s[3]), uint32(s[4]))
				}
			}
			return proxywasm.StatusNotFound
		}),
		fn("proxy_add_header_map_value", ps(5), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			key := strings.ToLower(in.Mem.ReadString("proxy_add_header_map_value", uint32(s[1]), uint32(s[2])))
			val := in.Mem.ReadString("proxy_add_header_map_value", uint32(s[3]), uint32(s[4]))
			fs, changed, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			*fs = append(*fs, [2]string{key, val})
			*changed = true
			return proxywasm.StatusOK
		}),
		fn("proxy_replace_header_map_value", ps(5), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			key := strings.ToLower(in.Mem.ReadString("proxy_replace_header_map_value", uint32(s[1]), uint32(s[2])))
			val := in.Mem.ReadString("proxy_replace_header_map_value", uint32(s[3]), uint32(s[4]))
			fs, changed, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			out := (*fs)[:0:0]
			done := false
			for _, f := range *fs {
				if f[0] == key {
					if done {
						continue
					}
					f[1], done = val, true
				}
				out = append(out, f)
			}
			if !done {
				out = append(out, [2]string{key, val})
			}
			*fs, *changed = out, true
			return proxywasm.StatusOK
		}),
		fn("proxy_remove_header_map_value", ps(3), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			key := in.Mem.Read("proxy_remove_header_map_value", uint32(s[1]), uint32(s[2]))
			fs, changed, st := in.headerMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			n := 0
			for _, f := range *fs {
				if equalFold(f[0], key) {
					n++
				}
			}
			if n == 0 {
				return proxywasm.StatusOK
			}
			// A new slice: the host compares it with the map as first shown.
			out := make([][2]string, 0, len(*fs)-n)
			for _, f := range *fs {
				if !equalFold(f[0], key) {
					out = append(out, f)
				}
			}
			*fs, *changed = out, true
			return proxywasm.StatusOK
		}),
	}
}

// headerMap returns the header map a guest may access now and the flag
// that records a change to it.
func (in *Instance) headerMap(mt proxywasm.MapType) (*[][2]string, *bool, proxywasm.Status) {
	if mt > proxywasm.MapTypeMax {
		return nil, nil, proxywasm.StatusBadArgument
	}
	if x := in.Stream; x != nil {
		switch mt {
		case proxywasm.MapHTTPRequestHeaders:
			return &x.Headers, &x.HeadersChanged, proxywasm.StatusOK
		case proxywasm.MapHTTPRequestTrailers:
			return &x.Trailers, &x.TrailersChanged, proxywasm.StatusOK
		}
	}
	return nil, nil, proxywasm.StatusNotFound
}

// equalFold reports whether key, in any ASCII case, is the lower-case name.
func equalFold(name string, key []byte) bool {
	if len(name) != len(key) {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if name[i] != c {
			return false
		}
	}
	return true
}
