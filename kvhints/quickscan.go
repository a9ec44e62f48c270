package kvhints

// quickSkipValue validates the value at b[i] with quickScan and returns the
// offset just past it; -1 means quickScan declined, which it always does
// natively.
//
// quickScan is the body scan's wasm fast path, written in WebAssembly
// assembly (quickscan_wasm.s, declared in quickscan_wasm.go); natively
// (quickscan_other.go) it always declines and the Go scanner decides.
// TestQuickScan and TestQuickSkipValue compare it with the Go scanner.
func quickSkipValue(b []byte, i int, stack []byte) int { return quickScan(b, i, stack, nil) }
