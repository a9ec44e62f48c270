package kvhints

// quickScan is implemented in quickscan_wasm.s and driven by quick.go.
//
//go:noescape
func quickScan(b []byte, st *quickState, stack []byte) int
