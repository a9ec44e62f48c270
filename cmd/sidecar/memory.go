package main

import (
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/host"
)

// instanceMemory returns, for a body limit of maxBody bytes, the cap on one
// filter instance's linear memory (in 64 KiB pages) and the size past which
// an instance is retired after its request.
//
// The guest says what it needs (filterspec.MemoryAt): a working set that does
// not move whatever bodies come, and how much further a hostile body within
// the limit can grow it. The cap leaves room for that peak, and an instance
// that grew 16 MiB past its working set is retired. Neither goes below the
// host's defaults, which fit the default 4 MiB limit; with fixed defaults a
// larger -max-body-bytes would retire every instance after every request
// (its working set starts above the retire size) and trap on bodies under
// the limit (503 for a body the limit allows).
func instanceMemory(maxBody int64) (limitPages uint32, retireBytes uint64) {
	const page, slack = 64 << 10, 16 << 20
	m := filterspec.MemoryAt(int(maxBody))
	limit := (m.Peak() + page - 1) / page
	limit = min(limit, 1<<16) // 4 GiB, all that wasm32 can address
	return uint32(max(limit, host.DefaultMemoryLimitPages)), max(m.WorkingSet()+slack, host.DefaultRetireBytes)
}
