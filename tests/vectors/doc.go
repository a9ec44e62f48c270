// Package vectors is kvgate's conformance kit: it loads the shared cases of
// tests/vectors (*.json, written by generate.py) and checks a host against
// them, so that every host is held to the same expectations by the same
// code.
//
// A host under test implements only a Runner: Send takes one Case, sends
// its request through the host (configured with Case.FilterConfig) and
// returns a Result (forwarded or not, the local reply's status and body,
// the forwarded bytes, and, when the host can tell, the rulebook's outcome
// and the canonical hint). Run loads every case, sends each as a subtest
// named after the case and does all the checking: forward or reject, the
// status, the forwarded bytes or that the body is unchanged, the error
// reply, the outcome, and the counter deltas, with readable diffs.
//
//	func TestVectors(t *testing.T) {
//		vectors.Run(t, &myRunner{})
//	}
//
// A runner states what it can observe (Observes); Run logs what it
// therefore does not check. A runner that can read its host's counters
// implements Meter; Run reads them around each Send and compares the
// difference with Expect.Counters. A runner that starts a host per plugin
// configuration implements Configurer. A host that cannot run some cases
// leaves them out with the Skip option, which makes each one a skipped
// subtest with its reason and logs the count; Each and Oracle pass every
// result on, for tests that compare hosts or feed tests/oracle/oracle.py.
//
// The package imports testing and is test support only: import it from
// _test.go files, never from a package that ships (its own test checks
// that no non-test package depends on it). README.md describes the file
// format and how to write a Runner for a new host.
package vectors
