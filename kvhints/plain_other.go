//go:build !wasm

package kvhints

// bulkPlain is false: natively the one-word loop in scanString is already
// fast, and a call per string would only add to it.
const bulkPlain = false

func plainWords(b []byte) int { return plainWordsGo(b) }

// quickScan always leaves the answer to the Go scanner natively.
func quickScan(b []byte, i int, stack []byte, out []int64) int { return -1 }
