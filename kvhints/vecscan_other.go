//go:build !amd64 && !wasm

package kvhints

// Without amd64 there is no vectorised scan: vecScan is a constant false,
// which compiles its calls in scanString and multibyteRun away. (On wasm
// the same constant is in plainwords_wasm.go: a file of its own would
// change the guest's bytes, which list the package's files.)
const (
	vecScan = false
	vecMin  = 32
)

func vecRun(b []byte, i int, escaped bool) (int, bool)    { return i, escaped }
func vecText(b []byte, i int, surrogate bool) (int, bool) { return i, surrogate }
