package abi

import (
	"context"
	"time"

	"github.com/kvgate/kvgate/proxywasm"
)

// logFuncs: logging, the clock and ticks.
func logFuncs() []hostFunc {
	return []hostFunc{
		fn("proxy_log", ps(3), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			msg := in.Mem.ReadString("proxy_log", uint32(s[1]), uint32(s[2]))
			lvl := proxywasm.LogLevel(s[0])
			if lvl > proxywasm.LogCritical {
				return proxywasm.StatusBadArgument
			}
			in.Log(lvl, msg)
			return proxywasm.StatusOK
		}),
		fn("proxy_get_log_level", ps(1), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.WriteU32("proxy_get_log_level", uint32(s[0]), uint32(in.Plugin.LogLevel()))
			return proxywasm.StatusOK
		}),
		fn("proxy_get_current_time_nanoseconds", ps(1), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.WriteU64("proxy_get_current_time_nanoseconds", uint32(s[0]), uint64(time.Now().UnixNano()))
			return proxywasm.StatusOK
		}),
		fn("proxy_set_tick_period_milliseconds", ps(1), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			// Accepted as Envoy does; this host never ticks (no timers in a
			// per-request pool), which a filter that needs ticks would notice.
			if uint32(s[0]) != 0 {
				in.Plugin.tickWarn.Do(func() {
					in.Plugin.Logger.Warn("wasm filter asked for a tick period; this host does not call proxy_on_tick")
				})
			}
			return proxywasm.StatusOK
		}),
	}
}
