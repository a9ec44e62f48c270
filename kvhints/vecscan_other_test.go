//go:build !amd64

package kvhints

import "testing"

// Without amd64 there is only the portable path.
func forcePortable(testing.TB) {}

func setVecScan(_ testing.TB, on bool) bool { return !on }
