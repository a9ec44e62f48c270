package kvhints

// bulkPlain makes scanString hand long runs to plainWords, and the body
// scan try quickScan first: on wasm both are assembly.
const bulkPlain = true

// plainWords is implemented in plainwords_wasm.s; plainWordsGo
// (plainwords.go) is its definition.
//
//go:noescape
func plainWords(b []byte) int

// The vectorised scan is amd64's (vecscan_amd64.go): on wasm vecScan is a
// constant false, which compiles its calls in scanString and multibyteRun
// away, and vecRun and vecText are declared without a body, never linked.
const (
	vecScan = false
	vecMin  = 32
)

func vecRun(b []byte, i int, escaped bool) (int, bool)

func vecText(b []byte, i int, surrogate bool) (int, bool)
