#include "textflag.h"

// This file holds plainWords, the wasm version of the string scan's inner
// loop. Its Go declaration is in plainwords_wasm.go, and plainWordsGo
// (plainwords.go) is the definition it implements; TestPlainWords and
// FuzzPlainWords compare the two on wasm.

// SPECIAL(w) pushes the mask of the word in local w (see below) before
// its final and with 0x80..80.
#define SPECIAL(w) \
	Get w; I64Const $0x2222222222222222; I64Xor; I64Const $0x0101010101010101; I64Sub; \
	Get w; I64Const $0x5c5c5c5c5c5c5c5c; I64Xor; I64Const $0x0101010101010101; I64Sub; I64Or; \
	Get w; I64Const $0x2020202020202020; I64Sub; I64Or; \
	Get w; I64Or

// func plainWords(b []byte) int
//
// The scan of plainWordsGo as one WebAssembly loop, two words per turn.
// Locals (i64): R0 the next byte's address, R1 the bytes left, R2 the
// start address, R3 and R4 the two words. A word's mask is stringSpecial:
//
//	((w ^ 0x22..22) - 0x01..01) | ((w ^ 0x5c..5c) - 0x01..01) | (w - 0x20..20) | w
//
// anded with 0x80..80; it is zero exactly when no byte of w is '"', '\\',
// below 0x20 or above 0x7f.
TEXT ·plainWords(SB), NOSPLIT, $0-32
	I64Load b_base+0(FP)
	Tee R0
	Set R2
	I64Load b_len+8(FP)
	Set R1

	Block
	Loop
		// Fewer than 16 bytes left: the caller goes on word by word.
		Get R1
		I64Const $16
		I64LtU
		BrIf $1

		Get R0
		I32WrapI64
		I64Load $0
		Set R3
		Get R0
		I32WrapI64
		I64Load $8
		Set R4

		SPECIAL(R3)
		SPECIAL(R4)
		I64Or

		I64Const $-0x7f7f7f7f7f7f7f80
		I64And
		I64Eqz
		I32Eqz
		BrIf $1 // a special byte in one of the two words

		Get R0
		I64Const $16
		I64Add
		Set R0
		Get R1
		I64Const $16
		I64Sub
		Set R1
		Br $0
	End
	End

	Get SP
	Get R0
	Get R2
	I64Sub
	I64Store ret+24(FP)
	RET
