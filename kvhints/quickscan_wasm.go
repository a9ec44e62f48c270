package kvhints

// quickScan is implemented in quickscan_wasm.s.
//
//go:noescape
func quickScan(b []byte, i int, stack []byte, out []int64) int
