package host

import (
	"context"
	"strings"
	"testing"
)

// untypedCall is a module whose function 0 calls function 3, declared
// with type 48 of 2 (FuzzInstrument's find): wazero 1.12's validator
// panics on it instead of refusing it.
const untypedCall = "\x00asm\x01\x00\x00\x00\x01\t\x02`\x00\x00`\x01\x7f\x01\x7f\x02\f\x01\x03000\x040000\x00\x00\x03\x04\x03\x0100\x05\x03\x01\x000\x06\x06\x01\x7f\x01A0\v\nF\x03+\x010\x7f\x02@A0A0A0A0A0\x10\x03000000000000000000000000A\v\x02\x00\v\x15\x00000000000000000000A\v"

// TestNewRefusesUntypedCall: the host refuses the module with an error
// and goes on; it does not die in wazero (modcheck's TestCompileRecovers
// covers a panic past the check).
func TestNewRefusesUntypedCall(t *testing.T) {
	h, err := New(context.Background(), []byte(untypedCall), Options{PoolSize: 1})
	if err == nil {
		_ = h.Close(context.Background())
		t.Fatal("New accepted the module")
	}
	if !strings.Contains(err.Error(), "the filter module is malformed") || !strings.Contains(err.Error(), "has type 48") {
		t.Fatalf("err = %v", err)
	}
}
