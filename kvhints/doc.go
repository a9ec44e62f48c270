// Package kvhints is kvgate's rulebook: the one implementation of the rules
// that decide what becomes of the kv_hints member of a request body. Every
// host runs these rules through the wasm guest (filter/), and Go callers
// (the kvhints CLI, producers, consumers) call them directly, so a body is
// decided the same way everywhere.
//
// The rules themselves are written down in docs/spec.md, in the project's
// words; this package implements its sections "Admission rules", "Untrusted
// mode and counting" and "Reading a body the way the worker does", and the
// conformance vectors in tests/vectors check it against them.
//
// What it holds:
//
//   - Rewrite and Rewriter: a request body and a Policy (trusted or not,
//     limits) in, the body to forward and a Result (outcome, reason, or the
//     HTTP status of a refused body) out. The body is read as Python's
//     json.loads reads bytes, so the worker sees exactly what was decided.
//   - Admit and Admitter: one kv_hints value in, an admitted Snapshot (the
//     canonical compact bytes) or the Reason it was ignored out.
//   - Snapshot and ActionView: read-only views of an admitted envelope, for
//     consumers (see kvhints/consumer).
//   - Envelope, NewEnvelope, NewFetchAction: building an envelope that
//     admission will accept, for producers.
//
// Two inner loops of the body scan also exist in WebAssembly assembly,
// because Go compiled to wasm is slow on a tokenizer (RATIONALE.md). Each
// comes as a set of files named after it:
//
//   - plainWords, the 16-bytes-a-turn test for plain string bytes:
//     plainwords_wasm.s with its declaration in plainwords_wasm.go,
//     plainWordsGo in plainwords.go as the definition, and
//     plainwords_other.go using that definition everywhere but wasm.
//   - quickScan, the whole scanner as one loop that declines what it does
//     not cover: quickscan_wasm.s with its declaration in
//     quickscan_wasm.go. Natively it is never called (quickscan_other.go
//     panics if it were): the Go scanner decides alone.
//
// Their tests (plainwords_test.go, quickscan_test.go) compare the assembly
// with the Go code; `make wasip1` runs them, and the rest of the package's
// tests, on wasm.
//
// Natively on amd64 the string scan has a vectorised path (RATIONALE.md):
//
//   - stringRunAVX2, the text of a string 32 bytes a turn with AVX2
//     (specials, UTF-8 with surrogates, escapes): vecscan_amd64.s with its
//     declaration and the calls scanString and multibyteRun make
//     (vecRun, vecText) in vecscan_amd64.go. vecScan, set once from the
//     CPU (AVX2, BMI1, BMI2), selects it; it is a constant false in
//     vecscan_other.go and, for wasm, in plainwords_wasm.go, where the
//     calls compile away. What it stops at, the Go code finishes, so
//     the portable path remains the definition of every result and
//     error; vecscan_amd64_test.go compares the two.
//
// The package is pure Go apart from those, with no I/O and no global
// state but vecScan, and builds for wasip1 as well as natively. A Rewriter reused across calls allocates
// nothing per request once its buffers have grown, which is what the guest
// relies on.
package kvhints
