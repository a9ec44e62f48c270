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
//   - ErrorBody and CheckContentEncoding: the small HTTP decisions every
//     host shares (the OpenAI-style error body, the 415 rule).
//
// The package is pure Go with no I/O and no global state, and builds for
// wasip1 as well as natively. A Rewriter reused across calls allocates
// nothing per request once its buffers have grown, which is what the guest
// relies on.
package kvhints
