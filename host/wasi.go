package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/proxywasm"
)

// wasi_errno_t values used here.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNoent   = 44
	errnoNosys   = 52
	errnoNotdir  = 20
	errnoNotsup  = 58
)

const randomGetMax = 64 << 10

func sig(p ...api.ValueType) []api.ValueType { return p }

func wasiConst(name string, params []api.ValueType, errno uint64) hostFunc {
	return hostFunc{name, params, r32, func(_ context.Context, _ *instance, s []uint64) { s[0] = errno }}
}

func stdFD(fd uint64) bool { return uint32(fd) == 1 || uint32(fd) == 2 }

// wasiFuncs are the wasi_snapshot_preview1 functions Envoy's proxy-wasm host
// (proxy-wasm-cpp-host) provides, with its answers: no files, no sockets,
// stdout/stderr go to the log. One deliberate difference: poll_oneoff is
// not supported (ENOTSUP), as in older Envoy releases, so a guest that
// sleeps fails here instead of busy-spinning a proxy worker.
func wasiFuncs() []hostFunc {
	return []hostFunc{
		{"fd_write", ps(4), r32, func(_ context.Context, in *instance, s []uint64) {
			s[0] = in.fdWrite("fd_write", u32(s[0]), u32(s[1]), u32(s[2]), u32(s[3]))
		}},
		{"fd_pwrite", sig(i32, i32, i32, i64, i32), r32, func(_ context.Context, in *instance, s []uint64) {
			s[0] = in.fdWrite("fd_pwrite", u32(s[0]), u32(s[1]), u32(s[2]), u32(s[4]))
		}},
		wasiConst("fd_read", ps(4), errnoNosys),
		wasiConst("fd_pread", sig(i32, i32, i32, i64, i32), errnoNosys),
		{"fd_seek", sig(i32, i64, i32, i32), r32, func(_ context.Context, in *instance, s []uint64) {
			in.h.log.Error("wasi_unstable fd_seek", "source", "wasm")
			s[0] = errnoSuccess
		}},
		{"fd_close", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			in.h.log.Error("wasi_unstable fd_close", "source", "wasm")
			s[0] = errnoSuccess
		}},
		{"fd_fdstat_get", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			if !stdFD(s[0]) {
				s[0] = errnoBadf
				return
			}
			var st [24]byte
			st[8] = 64 // fs_rights_base = FD_WRITE
			in.write("fd_fdstat_get", u32(s[1]), st[:])
			s[0] = errnoSuccess
		}},
		wasiConst("fd_fdstat_set_flags", ps(2), errnoNosys),
		{"fd_fdstat_set_rights", sig(i32, i64, i64), r32, stdOnly},
		{"fd_advise", sig(i32, i64, i64, i32), r32, func(_ context.Context, _ *instance, s []uint64) { s[0] = errnoSuccess }},
		{"fd_allocate", sig(i32, i64, i64), r32, stdOnly},
		{"fd_datasync", ps(1), r32, stdOnly},
		{"fd_sync", ps(1), r32, stdOnly},
		{"fd_filestat_set_size", sig(i32, i64), r32, stdOnly},
		{"fd_filestat_set_times", sig(i32, i64, i64, i32), r32, stdOnly},
		{"fd_readdir", sig(i32, i32, i32, i64, i32), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("fd_readdir", u32(s[4]), 0)
			s[0] = errnoNotdir
		}},
		{"fd_renumber", ps(2), r32, func(_ context.Context, _ *instance, s []uint64) {
			if !stdFD(s[0]) || !stdFD(s[1]) {
				s[0] = errnoBadf
				return
			}
			s[0] = errnoNotsup
		}},
		{"fd_tell", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			if !stdFD(s[0]) {
				s[0] = errnoBadf
				return
			}
			in.writeU64("fd_tell", u32(s[1]), 0)
			s[0] = errnoSuccess
		}},
		wasiConst("fd_prestat_get", ps(2), errnoBadf),
		wasiConst("fd_prestat_dir_name", ps(3), errnoNosys),
		wasiConst("fd_filestat_get", ps(2), errnoBadf),
		wasiConst("path_open", sig(i32, i32, i32, i32, i32, i64, i64, i32, i32), errnoNoent),
		wasiConst("path_filestat_get", ps(5), errnoNotsup),
		wasiConst("path_create_directory", ps(3), errnoNotsup),
		wasiConst("path_filestat_set_times", sig(i32, i32, i32, i32, i64, i64, i32), errnoNotsup),
		wasiConst("path_link", ps(7), errnoNotsup),
		{"path_readlink", ps(6), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("path_readlink", u32(s[5]), 0)
			s[0] = errnoNotsup
		}},
		wasiConst("path_remove_directory", ps(3), errnoNotsup),
		wasiConst("path_rename", ps(6), errnoNotsup),
		wasiConst("path_symlink", ps(5), errnoNotsup),
		wasiConst("path_unlink_file", ps(3), errnoNotsup),
		{"sock_accept", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("sock_accept", u32(s[2]), 0)
			s[0] = errnoNotsup
		}},
		{"sock_recv", ps(6), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("sock_recv", u32(s[4]), 0)
			in.write("sock_recv", u32(s[5]), []byte{0, 0})
			s[0] = errnoNotsup
		}},
		{"sock_send", ps(5), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("sock_send", u32(s[4]), 0)
			s[0] = errnoNotsup
		}},
		wasiConst("sock_shutdown", ps(2), errnoNotsup),
		{"environ_sizes_get", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			size := 0
			for _, e := range in.h.opts.Env {
				size += len(e) + 1
			}
			in.writeU32("environ_sizes_get", u32(s[0]), uint32(len(in.h.opts.Env)))
			in.writeU32("environ_sizes_get", u32(s[1]), uint32(size))
			s[0] = errnoSuccess
		}},
		{"environ_get", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			arr, buf := u32(s[0]), u32(s[1])
			for _, e := range in.h.opts.Env {
				in.writeU32("environ_get", arr, buf)
				in.write("environ_get", buf, append([]byte(e), 0))
				arr += 4
				buf += uint32(len(e)) + 1
			}
			s[0] = errnoSuccess
		}},
		{"args_sizes_get", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("args_sizes_get", u32(s[0]), 0)
			in.writeU32("args_sizes_get", u32(s[1]), 0)
			s[0] = errnoSuccess
		}},
		wasiConst("args_get", ps(2), errnoSuccess),
		{"clock_time_get", sig(i32, i64, i32), r32, func(_ context.Context, in *instance, s []uint64) {
			var t uint64
			switch u32(s[0]) {
			case 0:
				t = uint64(time.Now().UnixNano())
			case 1:
				t = uint64(time.Since(in.h.epoch)) + 1
			default:
				s[0] = errnoNotsup
				return
			}
			in.writeU64("clock_time_get", u32(s[2]), t)
			s[0] = errnoSuccess
		}},
		{"clock_res_get", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			if id := u32(s[0]); id > 1 {
				s[0] = errnoNotsup
				return
			}
			in.writeU64("clock_res_get", u32(s[1]), 1)
			s[0] = errnoSuccess
		}},
		{"random_get", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			n := u32(s[1])
			if n > randomGetMax {
				s[0] = errnoInval
				return
			}
			b := in.read("random_get", u32(s[0]), n)
			_, _ = rand.Read(b)
			s[0] = errnoSuccess
		}},
		{"sched_yield", nil, r32, func(_ context.Context, _ *instance, s []uint64) { s[0] = errnoSuccess }},
		{"poll_oneoff", ps(4), r32, func(_ context.Context, in *instance, s []uint64) {
			// Checked like any call, then refused: Go's runtime throws on an
			// error here, which is what a sleeping guest gets in Envoy
			// releases without a poll_oneoff of their own.
			in.checkRange("poll_oneoff", u32(s[0]), uint64(u32(s[2]))*48)
			in.checkRange("poll_oneoff", u32(s[1]), uint64(u32(s[2]))*32)
			in.checkRange("poll_oneoff", u32(s[3]), 4)
			s[0] = errnoNotsup
		}},
		{"proc_exit", ps(1), nil, func(_ context.Context, in *instance, s []uint64) {
			panic(&hostAbort{"guest called proc_exit(" + itoa(uint64(u32(s[0]))) + ")"})
		}},
	}
}

func stdOnly(_ context.Context, _ *instance, s []uint64) {
	if !stdFD(s[0]) {
		s[0] = errnoBadf
		return
	}
	s[0] = errnoSuccess
}

// fdWrite sends the guest's stdout (info) and stderr (error) to the log.
// Envoy logs every write as one line; here output is line-buffered so that
// a Go panic trace reads as lines, not as one record per fragment.
func (in *instance) fdWrite(fn string, fd, iovs, iovsLen, nwritten uint32) uint64 {
	if fd != 1 && fd != 2 {
		return errnoBadf
	}
	in.checkRange(fn, iovs, 8*uint64(iovsLen))
	buf := &in.out[fd-1]
	written := 0
	for i := uint32(0); i < iovsLen; i++ {
		vec := in.read(fn, iovs+8*i, 8)
		ptr := uint32(vec[0]) | uint32(vec[1])<<8 | uint32(vec[2])<<16 | uint32(vec[3])<<24
		n := uint32(vec[4]) | uint32(vec[5])<<8 | uint32(vec[6])<<16 | uint32(vec[7])<<24
		*buf = append(*buf, in.read(fn, ptr, n)...)
		written += int(n)
	}
	for {
		i := bytes.IndexByte(*buf, '\n')
		if i < 0 {
			break
		}
		if i > 0 {
			in.guestLog(fdLevel(fd), string((*buf)[:i]))
		}
		*buf = (*buf)[i+1:]
	}
	if len(*buf) > 4096 {
		in.flushOutput()
	}
	in.writeU32(fn, nwritten, uint32(written))
	return errnoSuccess
}

func fdLevel(fd uint32) proxywasm.LogLevel {
	if fd == 1 {
		return proxywasm.LogInfo
	}
	return proxywasm.LogError
}

// flushOutput logs what is left of partial stdout/stderr lines.
func (in *instance) flushOutput() {
	for i := range in.out {
		if len(in.out[i]) > 0 {
			in.guestLog(fdLevel(uint32(i+1)), string(in.out[i]))
			in.out[i] = in.out[i][:0]
		}
	}
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}
