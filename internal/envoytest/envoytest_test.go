package envoytest

import "testing"

// FreePort never hands out one port twice, although the kernel often
// gives consecutive binds the same one.
func TestFreePortUnique(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 2000; i++ {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice (call %d)", p, i)
		}
		seen[p] = true
	}
}
