//go:build !wasm

package kvhints

// bulkPlain is false: natively the one-word loop in scanString is already
// fast, and a call per string would only add to it. It also compiles the
// quickScan calls away.
const bulkPlain = false

func plainWords(b []byte) int { return plainWordsGo(b) }
