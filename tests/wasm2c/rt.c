// wasm2c's runtime (wasm-rt-impl.c, from Debian's wabt package) as
// module.c runs it: its traps go to module.c's handler, which unwinds to
// the hook that entered the guest, instead of to the runtime's one global
// jump buffer. build.sh compiles it with the same WASM_RT_* settings as
// the generated module.
#include "wasm-rt.h"

void kvgate_w2c_trap(wasm_rt_trap_t code);
#define WASM_RT_TRAP_HANDLER kvgate_w2c_trap

#include "wasm-rt-impl.c"
