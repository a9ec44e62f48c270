//go:build !wasm

package kvhints

// bulkPlain is false: natively the one-word loop in scanString is already
// fast, and a call per string would only add to it.
const bulkPlain = false

func plainWords(b []byte) int { return plainWordsGo(b) }

// quickSkipValue and quickScan always leave the answer to the Go scanner
// natively.
func quickSkipValue(b []byte, i int, stack []byte) int { return -1 }

func quickScan(b []byte, i int, stack []byte, out []int64) int { return -1 }
