//go:build !wasm

package kvhints

// bulkPlain is false: natively the one-word loop in scanString is already
// fast, and a call per string would only add to it.
const bulkPlain = false

func plainWords(b []byte) int { return plainWordsGo(b) }

// quickSkipValue always leaves the answer to skipValue natively.
func quickSkipValue(b []byte, i int, stack []byte) int { return -1 }
