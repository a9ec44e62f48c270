//go:build !(linux || darwin)

package linmem

import "github.com/tetratelabs/wazero/experimental"

func reserve(uint64) experimental.LinearMemory { return nil }
