package kvhints

// bulkPlain makes scanString hand long runs to plainWords.
const bulkPlain = true

// plainWords is implemented in plain_wasm.s.
//
//go:noescape
func plainWords(b []byte) int

// quickSkipValue is implemented in value_wasm.s.
//
//go:noescape
func quickSkipValue(b []byte, i int, stack []byte) int
