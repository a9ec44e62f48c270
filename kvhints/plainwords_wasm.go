package kvhints

// bulkPlain makes scanString hand long runs to plainWords, and the body
// scan try quickScan first: on wasm both are assembly.
const bulkPlain = true

// plainWords is implemented in plainwords_wasm.s; plainWordsGo
// (plainwords.go) is its definition.
//
//go:noescape
func plainWords(b []byte) int
