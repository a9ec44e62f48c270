// Package hostcall is what the host's function tables (abi, wasi, the
// deadline check) share: the description of one host function, its export
// into a wazero host module, and bounds-checked access to the calling
// guest's memory.
//
// A host function that is handed a pointer or a length reaching outside the
// guest's memory panics with a *Fault. The proxy-wasm functions (package
// abi) answer it with InvalidMemoryAccess, as Envoy does; elsewhere (WASI)
// wazero turns the panic into a trap of the guest's call, so a bad call
// fails that guest instance only.
package hostcall

import (
	"context"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Func is one host function, called with the state T of the guest instance
// that calls it. Fn reads its arguments from stack and writes its results
// there, as wazero's api.GoModuleFunc does.
type Func[T any] struct {
	Name            string
	Params, Results []api.ValueType
	Fn              func(ctx context.Context, t T, stack []uint64)
}

// Export adds fs to b. Each call finds the calling instance's T with from,
// from the context of the guest call; a call made without one (which the
// host never does) aborts the guest.
func Export[T any](b wazero.HostModuleBuilder, fs []Func[T], from func(context.Context) (T, bool)) {
	for _, f := range fs {
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, s []uint64) {
			t, ok := from(ctx)
			if !ok {
				panic(&Abort{f.Name + ": called outside a host call"})
			}
			f.Fn(ctx, t, s)
		}), f.Params, f.Results).Export(f.Name)
	}
}

// Signature is a function's parameter and result types.
type Signature struct{ Params, Results []api.ValueType }

// AddSignatures records the signature of every function of fs, as
// "module.name", in sigs.
func AddSignatures[T any](sigs map[string]Signature, module string, fs []Func[T]) {
	for _, f := range fs {
		sigs[module+"."+f.Name] = Signature{f.Params, f.Results}
	}
}

// Value types, for function tables.
const (
	I32 = api.ValueTypeI32
	I64 = api.ValueTypeI64
)

// I32s returns n i32 parameters.
func I32s(n int) []api.ValueType {
	p := make([]api.ValueType, n)
	for i := range p {
		p[i] = I32
	}
	return p
}

// Types returns its arguments, for mixed parameter lists.
func Types(t ...api.ValueType) []api.ValueType { return t }

// R32 is a single i32 result.
var R32 = []api.ValueType{I32}

// Fault is the panic value of a host function handed a bad pointer or
// length.
type Fault struct {
	Fn       string
	Ptr, Len uint32
}

func (f *Fault) Error() string {
	return fmt.Sprintf("%s: guest memory access out of bounds (ptr=%#x len=%d)", f.Fn, f.Ptr, f.Len)
}

// Abort is the panic value of a host function that stops the guest on
// purpose (proc_exit).
type Abort struct{ Msg string }

func (a *Abort) Error() string { return a.Msg }

// Memory is a guest's linear memory. Every access is bounds-checked and
// panics with a *Fault naming fn, the host function making it, when it
// falls outside the memory.
type Memory struct{ m api.Memory }

// NewMemory wraps m.
func NewMemory(m api.Memory) Memory { return Memory{m} }

// Read returns n bytes at ptr; the slice aliases guest memory.
func (m Memory) Read(fn string, ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := m.m.Read(ptr, n)
	if !ok {
		panic(&Fault{fn, ptr, n})
	}
	return b
}

// ReadString returns a copy of n bytes at ptr.
func (m Memory) ReadString(fn string, ptr, n uint32) string {
	return string(m.Read(fn, ptr, n))
}

// CheckRange faults unless [ptr, ptr+n) lies inside the memory.
func (m Memory) CheckRange(fn string, ptr uint32, n uint64) {
	if uint64(ptr)+n > uint64(m.m.Size()) {
		panic(&Fault{fn, ptr, uint32(min(n, math.MaxUint32))})
	}
}

// Write copies b to ptr.
func (m Memory) Write(fn string, ptr uint32, b []byte) {
	if !m.m.Write(ptr, b) {
		panic(&Fault{fn, ptr, uint32(len(b))})
	}
}

// WriteU32 writes v at ptr, little-endian.
func (m Memory) WriteU32(fn string, ptr, v uint32) {
	if !m.m.WriteUint32Le(ptr, v) {
		panic(&Fault{fn, ptr, 4})
	}
}

// WriteU64 writes v at ptr, little-endian.
func (m Memory) WriteU64(fn string, ptr uint32, v uint64) {
	if !m.m.WriteUint64Le(ptr, v) {
		panic(&Fault{fn, ptr, 8})
	}
}
