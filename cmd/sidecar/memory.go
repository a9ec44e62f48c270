package main

import "github.com/kvgate/kvgate/host"

// instanceMemory returns, for a body limit of maxBody bytes, the cap on one
// filter instance's linear memory (in 64 KiB pages) and the size past which
// an instance is retired after its request.
//
// The kvgate guest sets its buffers aside at start-up: the block the host
// copies a body into and the rewriter's output, maxBody+1 bytes each, besides
// its runtime (a few MiB; 16 are allowed). That working set does not move
// whatever bodies come (wasm's TestMemoryBounded). Past it, an instance
// grows only on a hostile body: a body nested as deep as it is long needs a
// container stack of its length, which costs up to four times that in
// linear memory once the guest's heap has grown around it. So the cap
// leaves room for five times the limit beyond the working set, and an
// instance that grew 16 MiB past its working set is retired. Neither goes
// below the host's defaults, which fit the default 4 MiB limit; with fixed
// defaults a larger -max-body-bytes would retire every instance after
// every request (its working set starts above the retire size) and trap on
// bodies under the limit (503 for a body the limit allows).
func instanceMemory(maxBody int64) (limitPages uint32, retireBytes uint64) {
	const page, runtime, slack = 64 << 10, 16 << 20, 16 << 20
	work := uint64(2*(maxBody+1)) + runtime
	limit := (work + 5*uint64(maxBody) + page - 1) / page
	limit = min(limit, 1<<16) // 4 GiB, all that wasm32 can address
	return uint32(max(limit, host.DefaultMemoryLimitPages)), max(work+slack, host.DefaultRetireBytes)
}
