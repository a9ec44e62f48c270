package abi

import (
	"context"

	"github.com/kvgate/kvgate/host/internal/hostcall"
	"github.com/kvgate/kvgate/proxywasm"
)

// metricFuncs: the guest's metrics, shared by every instance (Plugin.Metrics).
func metricFuncs() []hostFunc {
	i32i64 := hostcall.Types(hostcall.I32, hostcall.I64)
	return []hostFunc{
		fn("proxy_define_metric", ps(4), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			name := in.Mem.ReadString("proxy_define_metric", uint32(s[1]), uint32(s[2]))
			in.Mem.Read("proxy_define_metric", uint32(s[3]), 4)
			id, st := in.Plugin.Metrics.Define(proxywasm.MetricType(s[0]), name)
			if st != proxywasm.StatusOK {
				in.Plugin.Logger.Warn("wasm filter defined a metric this host rejects", "name", name, "status", st)
				return st
			}
			in.Mem.WriteU32("proxy_define_metric", uint32(s[3]), id)
			return proxywasm.StatusOK
		}),
		fn("proxy_increment_metric", i32i64, func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			return in.Plugin.Metrics.Increment(uint32(s[0]), int64(s[1]))
		}),
		fn("proxy_record_metric", i32i64, func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			return in.Plugin.Metrics.Record(uint32(s[0]), s[1])
		}),
		fn("proxy_get_metric", ps(2), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			v, st := in.Plugin.Metrics.Get(uint32(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			in.Mem.WriteU64("proxy_get_metric", uint32(s[1]), v)
			return proxywasm.StatusOK
		}),
	}
}
