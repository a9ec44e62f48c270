// Package wasi is the host's wasi_snapshot_preview1: the functions Envoy's
// proxy-wasm host (proxy-wasm-cpp-host) gives a guest, with its answers: no
// files, no sockets, an environment the host chooses, real clocks and
// randomness, and stdout and stderr sent to the log a line at a time.
//
// One deliberate difference: poll_oneoff is not supported (ENOTSUP), as in
// older Envoy releases, so a guest that sleeps fails here instead of
// busy-spinning a proxy worker.
package wasi

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"strconv"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/hostcall"
	"github.com/kvgate/kvgate/proxywasm"
)

// System is one guest instance's WASI: its memory and what the functions
// read and write besides. The host fills in the exported fields before the
// instance's first call.
type System struct {
	Mem hostcall.Memory
	// Env is the guest's environment, "KEY=value" strings.
	Env []string
	// Epoch is the origin of the monotonic clock.
	Epoch time.Time
	// Log receives the guest's output lines: stdout at LogInfo, stderr at
	// LogError.
	Log func(level proxywasm.LogLevel, msg string)
	// Logger receives the host's own notes on the guest's calls.
	Logger *slog.Logger

	out [2][]byte // partial stdout and stderr lines
}

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

type hostFunc = hostcall.Func[*System]

var (
	ps  = hostcall.I32s
	sig = hostcall.Types
	r32 = hostcall.R32
	i32 = hostcall.I32
	i64 = hostcall.I64
)

// f is a function that returns an errno.
func f(name string, params []api.ValueType, fn func(ctx context.Context, sys *System, s []uint64)) hostFunc {
	return hostFunc{Name: name, Params: params, Results: r32, Fn: fn}
}

// constant is a function that only answers errno.
func constant(name string, params []api.ValueType, errno uint64) hostFunc {
	return f(name, params, func(_ context.Context, _ *System, s []uint64) { s[0] = errno })
}

func stdFD(fd uint64) bool { return uint32(fd) == 1 || uint32(fd) == 2 }

// Funcs are the wasi_snapshot_preview1 functions.
func Funcs() []hostFunc {
	return []hostFunc{
		f("fd_write", ps(4), func(_ context.Context, sys *System, s []uint64) {
			s[0] = sys.fdWrite("fd_write", uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]))
		}),
		f("fd_pwrite", sig(i32, i32, i32, i64, i32), func(_ context.Context, sys *System, s []uint64) {
			s[0] = sys.fdWrite("fd_pwrite", uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[4]))
		}),
		constant("fd_read", ps(4), errnoNosys),
		constant("fd_pread", sig(i32, i32, i32, i64, i32), errnoNosys),
		f("fd_seek", sig(i32, i64, i32, i32), func(_ context.Context, sys *System, s []uint64) {
			sys.Logger.Error("wasi_unstable fd_seek", "source", "wasm")
			s[0] = errnoSuccess
		}),
		f("fd_close", ps(1), func(_ context.Context, sys *System, s []uint64) {
			sys.Logger.Error("wasi_unstable fd_close", "source", "wasm")
			s[0] = errnoSuccess
		}),
		f("fd_fdstat_get", ps(2), func(_ context.Context, sys *System, s []uint64) {
			if !stdFD(s[0]) {
				s[0] = errnoBadf
				return
			}
			var st [24]byte
			st[8] = 64 // fs_rights_base = FD_WRITE
			sys.Mem.Write("fd_fdstat_get", uint32(s[1]), st[:])
			s[0] = errnoSuccess
		}),
		constant("fd_fdstat_set_flags", ps(2), errnoNosys),
		f("fd_fdstat_set_rights", sig(i32, i64, i64), stdOnly),
		f("fd_advise", sig(i32, i64, i64, i32), func(_ context.Context, _ *System, s []uint64) { s[0] = errnoSuccess }),
		f("fd_allocate", sig(i32, i64, i64), stdOnly),
		f("fd_datasync", ps(1), stdOnly),
		f("fd_sync", ps(1), stdOnly),
		f("fd_filestat_set_size", sig(i32, i64), stdOnly),
		f("fd_filestat_set_times", sig(i32, i64, i64, i32), stdOnly),
		f("fd_readdir", sig(i32, i32, i32, i64, i32), func(_ context.Context, sys *System, s []uint64) {
			sys.Mem.WriteU32("fd_readdir", uint32(s[4]), 0)
			s[0] = errnoNotdir
		}),
		f("fd_renumber", ps(2), func(_ context.Context, _ *System, s []uint64) {
			if !stdFD(s[0]) || !stdFD(s[1]) {
				s[0] = errnoBadf
				return
			}
			s[0] = errnoNotsup
		}),
		f("fd_tell", ps(2), func(_ context.Context, sys *System, s []uint64) {
			if !stdFD(s[0]) {
				s[0] = errnoBadf
				return
			}
			sys.Mem.WriteU64("fd_tell", uint32(s[1]), 0)
			s[0] = errnoSuccess
		}),
		constant("fd_prestat_get", ps(2), errnoBadf),
		constant("fd_prestat_dir_name", ps(3), errnoNosys),
		constant("fd_filestat_get", ps(2), errnoBadf),
		constant("path_open", sig(i32, i32, i32, i32, i32, i64, i64, i32, i32), errnoNoent),
		constant("path_filestat_get", ps(5), errnoNotsup),
		constant("path_create_directory", ps(3), errnoNotsup),
		constant("path_filestat_set_times", sig(i32, i32, i32, i32, i64, i64, i32), errnoNotsup),
		constant("path_link", ps(7), errnoNotsup),
		f("path_readlink", ps(6), func(_ context.Context, sys *System, s []uint64) {
			sys.Mem.WriteU32("path_readlink", uint32(s[5]), 0)
			s[0] = errnoNotsup
		}),
		constant("path_remove_directory", ps(3), errnoNotsup),
		constant("path_rename", ps(6), errnoNotsup),
		constant("path_symlink", ps(5), errnoNotsup),
		constant("path_unlink_file", ps(3), errnoNotsup),
		f("sock_accept", ps(3), func(_ context.Context, sys *System, s []uint64) {
			sys.Mem.WriteU32("sock_accept", uint32(s[2]), 0)
			s[0] = errnoNotsup
		}),
		f("sock_recv", ps(6), func(_ context.Context, sys *System, s []uint64) {
			sys.Mem.WriteU32("sock_recv", uint32(s[4]), 0)
			sys.Mem.Write("sock_recv", uint32(s[5]), []byte{0, 0})
			s[0] = errnoNotsup
		}),
		f("sock_send", ps(5), func(_ context.Context, sys *System, s []uint64) {
			sys.Mem.WriteU32("sock_send", uint32(s[4]), 0)
			s[0] = errnoNotsup
		}),
		constant("sock_shutdown", ps(2), errnoNotsup),
		f("environ_sizes_get", ps(2), func(_ context.Context, sys *System, s []uint64) {
			size := 0
			for _, e := range sys.Env {
				size += len(e) + 1
			}
			sys.Mem.WriteU32("environ_sizes_get", uint32(s[0]), uint32(len(sys.Env)))
			sys.Mem.WriteU32("environ_sizes_get", uint32(s[1]), uint32(size))
			s[0] = errnoSuccess
		}),
		f("environ_get", ps(2), func(_ context.Context, sys *System, s []uint64) {
			arr, buf := uint32(s[0]), uint32(s[1])
			for _, e := range sys.Env {
				sys.Mem.WriteU32("environ_get", arr, buf)
				sys.Mem.Write("environ_get", buf, append([]byte(e), 0))
				arr += 4
				buf += uint32(len(e)) + 1
			}
			s[0] = errnoSuccess
		}),
		f("args_sizes_get", ps(2), func(_ context.Context, sys *System, s []uint64) {
			sys.Mem.WriteU32("args_sizes_get", uint32(s[0]), 0)
			sys.Mem.WriteU32("args_sizes_get", uint32(s[1]), 0)
			s[0] = errnoSuccess
		}),
		constant("args_get", ps(2), errnoSuccess),
		f("clock_time_get", sig(i32, i64, i32), func(_ context.Context, sys *System, s []uint64) {
			var t uint64
			switch uint32(s[0]) {
			case 0:
				t = uint64(time.Now().UnixNano())
			case 1:
				t = uint64(time.Since(sys.Epoch)) + 1
			default:
				s[0] = errnoNotsup
				return
			}
			sys.Mem.WriteU64("clock_time_get", uint32(s[2]), t)
			s[0] = errnoSuccess
		}),
		f("clock_res_get", ps(2), func(_ context.Context, sys *System, s []uint64) {
			if id := uint32(s[0]); id > 1 {
				s[0] = errnoNotsup
				return
			}
			sys.Mem.WriteU64("clock_res_get", uint32(s[1]), 1)
			s[0] = errnoSuccess
		}),
		f("random_get", ps(2), func(_ context.Context, sys *System, s []uint64) {
			n := uint32(s[1])
			if n > randomGetMax {
				s[0] = errnoInval
				return
			}
			b := sys.Mem.Read("random_get", uint32(s[0]), n)
			_, _ = rand.Read(b)
			s[0] = errnoSuccess
		}),
		f("sched_yield", nil, func(_ context.Context, _ *System, s []uint64) { s[0] = errnoSuccess }),
		f("poll_oneoff", ps(4), func(_ context.Context, sys *System, s []uint64) {
			// Checked like any call, then refused: Go's runtime throws on an
			// error here, which is what a sleeping guest gets in Envoy
			// releases without a poll_oneoff of their own.
			sys.Mem.CheckRange("poll_oneoff", uint32(s[0]), uint64(uint32(s[2]))*48)
			sys.Mem.CheckRange("poll_oneoff", uint32(s[1]), uint64(uint32(s[2]))*32)
			sys.Mem.CheckRange("poll_oneoff", uint32(s[3]), 4)
			s[0] = errnoNotsup
		}),
		{Name: "proc_exit", Params: ps(1), Fn: func(_ context.Context, sys *System, s []uint64) {
			panic(&hostcall.Abort{Msg: "guest called proc_exit(" + strconv.FormatUint(uint64(uint32(s[0])), 10) + ")"})
		}},
	}
}

func stdOnly(_ context.Context, _ *System, s []uint64) {
	if !stdFD(s[0]) {
		s[0] = errnoBadf
		return
	}
	s[0] = errnoSuccess
}

// fdWrite sends the guest's stdout (info) and stderr (error) to the log.
// Envoy logs every write as one line; here output is line-buffered so that
// a Go panic trace reads as lines, not as one record per fragment.
func (sys *System) fdWrite(fn string, fd, iovs, iovsLen, nwritten uint32) uint64 {
	if fd != 1 && fd != 2 {
		return errnoBadf
	}
	sys.Mem.CheckRange(fn, iovs, 8*uint64(iovsLen))
	buf := &sys.out[fd-1]
	written := 0
	for i := uint32(0); i < iovsLen; i++ {
		vec := sys.Mem.Read(fn, iovs+8*i, 8)
		ptr := uint32(vec[0]) | uint32(vec[1])<<8 | uint32(vec[2])<<16 | uint32(vec[3])<<24
		n := uint32(vec[4]) | uint32(vec[5])<<8 | uint32(vec[6])<<16 | uint32(vec[7])<<24
		*buf = append(*buf, sys.Mem.Read(fn, ptr, n)...)
		written += int(n)
	}
	for {
		i := bytes.IndexByte(*buf, '\n')
		if i < 0 {
			break
		}
		if i > 0 {
			sys.Log(fdLevel(fd), string((*buf)[:i]))
		}
		*buf = (*buf)[i+1:]
	}
	if len(*buf) > 4096 {
		sys.Flush()
	}
	sys.Mem.WriteU32(fn, nwritten, uint32(written))
	return errnoSuccess
}

func fdLevel(fd uint32) proxywasm.LogLevel {
	if fd == 1 {
		return proxywasm.LogInfo
	}
	return proxywasm.LogError
}

// Pending reports whether partial output lines wait for Flush.
func (sys *System) Pending() bool { return len(sys.out[0])+len(sys.out[1]) > 0 }

// Flush logs what is left of partial stdout and stderr lines; the host
// calls it after each guest call that left some.
func (sys *System) Flush() {
	for i := range sys.out {
		if len(sys.out[i]) > 0 {
			sys.Log(fdLevel(uint32(i+1)), string(sys.out[i]))
			sys.out[i] = sys.out[i][:0]
		}
	}
}
