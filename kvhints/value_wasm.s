#include "textflag.h"

// This file holds quickScan, the wasm fast path of the body scan: one
// compact loop over an explicit stack of closers. It accepts a subset of
// what the Go scanner (scan.go, Rewriter.scan) accepts and gives up
// (returns -1) on everything else, leaving the answer, and the error
// message, to the Go code. What it gives up on: any error (invalid UTF-8
// included), nesting deeper than its stack, and, when scanning a body, a
// top-level key with an escape or more kv_hints members than its output
// holds.
//
// Locals (i64): R0 the next byte's address, R1 the end address, R2 the
// body's base address, R3 the stack's top, R4 its base, R5 its limit,
// R6 the current byte, R7 and R8 scratch, R9 and R10 word masks. When
// scanning a body: R11 the output's address, R12 the index of the current
// top-level member, R13 the kv_hints members recorded, R14 the index of
// the first other member (-1 for none yet), R15 flags: 1 an escape was
// seen in the current string, 2 the current member is a kv_hints member.
// R11 is 0 when validating a single value.

// GIVEUP returns -1.
#define GIVEUP \
	Get SP; I64Const $-1; I64Store ret+80(FP); RET

// NEEDMORE gives up unless R0 < R1.
#define NEEDMORE \
	Get R0; Get R1; I64GeU; If; GIVEUP; End

// BYTEAT(a, k, r) loads the byte at address a+k into r.
#define BYTEAT(a, k, r) \
	Get a; I32WrapI64; I64Load8U $k; Set r

// LOADC loads the byte at R0 into R6.
#define LOADC BYTEAT(R0, 0, R6)

#define INC(r, n) \
	Get r; I64Const $n; I64Add; Set r

// ISDIGIT(r) pushes whether local r holds an ASCII digit.
#define ISDIGIT(r) \
	Get r; I64Const $48; I64Sub; I64Const $10; I64LtU

// SKIPWS moves R0 past JSON whitespace (space, tab, LF, CR).
#define SKIPWS \
	Block; Loop; \
	Get R0; Get R1; I64GeU; BrIf $1; \
	LOADC; \
	Get R6; I64Const $32; I64Ne; \
	Get R6; I64Const $9; I64Ne; I32And; \
	Get R6; I64Const $10; I64Ne; I32And; \
	Get R6; I64Const $13; I64Ne; I32And; \
	BrIf $1; \
	INC(R0, 1); Br $0; \
	End; End

// DIGITS moves R0 past ASCII digits.
#define DIGITS \
	Block; Loop; \
	Get R0; Get R1; I64GeU; BrIf $1; \
	LOADC; ISDIGIT(R6); I32Eqz; BrIf $1; \
	INC(R0, 1); Br $0; \
	End; End

// SPECIAL(w) pushes stringSpecial(w) (scan.go) before its final and.
#define SPECIAL(w) \
	Get w; I64Const $0x2222222222222222; I64Xor; I64Const $0x0101010101010101; I64Sub; \
	Get w; I64Const $0x5c5c5c5c5c5c5c5c; I64Xor; I64Const $0x0101010101010101; I64Sub; I64Or; \
	Get w; I64Const $0x2020202020202020; I64Sub; I64Or; \
	Get w; I64Or

// HEX(k) gives up unless the byte at R0+k is a hex digit.
#define HEX(k) \
	BYTEAT(R0, k, R8); \
	ISDIGIT(R8); \
	Get R8; I64Const $32; I64Or; I64Const $97; I64Sub; I64Const $6; I64LtU; \
	I32Or; I32Eqz; If; GIVEUP; End

// UTF8 moves R0 past the UTF-8 sequence whose first byte, at R0 and in
// R6, is not ASCII, and gives up unless it is one that scanString accepts:
// what utf8.DecodeRune accepts (no overlong forms, nothing past U+10FFFF)
// and the encoded surrogates ED A0..BF 80..BF, which Python's json.loads
// reads. So after ED any continuation byte will do. R8 is its length, R9
// and R10 the range of its second byte.
#define UTF8 \
	Get R6; I64Const $0xC2; I64LtU; If; GIVEUP; End; \
	I64Const $2; Set R8; I64Const $0x80; Set R9; I64Const $0xBF; Set R10; \
	Get R6; I64Const $0xE0; I64GeU; \
	If; \
		I64Const $3; Set R8; \
		Get R6; I64Const $0xE0; I64Eq; If; I64Const $0xA0; Set R9; End; \
	End; \
	Get R6; I64Const $0xF0; I64GeU; \
	If; \
		Get R6; I64Const $0xF5; I64GeU; If; GIVEUP; End; \
		I64Const $4; Set R8; \
		Get R6; I64Const $0xF0; I64Eq; If; I64Const $0x90; Set R9; End; \
		Get R6; I64Const $0xF4; I64Eq; If; I64Const $0x8F; Set R10; End; \
	End; \
	Get R0; Get R8; I64Add; Get R1; I64GtU; If; GIVEUP; End; \
	BYTEAT(R0, 1, R7); \
	Get R7; Get R9; I64LtU; Get R7; Get R10; I64GtU; I32Or; If; GIVEUP; End; \
	Get R8; I64Const $3; I64GeU; \
	If; \
		Get R0; I32WrapI64; I64Load8U $2; I64Const $0xC0; I64And; I64Const $0x80; I64Ne; If; GIVEUP; End; \
	End; \
	Get R8; I64Const $4; I64Eq; \
	If; \
		Get R0; I32WrapI64; I64Load8U $3; I64Const $0xC0; I64And; I64Const $0x80; I64Ne; If; GIVEUP; End; \
	End; \
	Get R0; Get R8; I64Add; Set R0

// STRING moves R0 from the opening quote of a string to just past its
// closing quote. Runs of plain bytes go 16 at a time, and a block holding
// a special byte is entered at that byte.
#define STRING \
	INC(R0, 1); \
	Block; Loop; \
		Block; Loop; \
			Get R1; Get R0; I64Sub; I64Const $16; I64LtU; BrIf $1; \
			Get R0; I32WrapI64; I64Load $0; Set R7; \
			Get R0; I32WrapI64; I64Load $8; Set R8; \
			SPECIAL(R7); I64Const $-0x7f7f7f7f7f7f7f80; I64And; Set R9; \
			SPECIAL(R8); I64Const $-0x7f7f7f7f7f7f7f80; I64And; Set R10; \
			Get R9; Get R10; I64Or; I64Eqz; \
			If; INC(R0, 16); Br $1; End; \
			Get R9; I64Eqz; \
			If; \
				Get R0; I64Const $8; I64Add; Get R10; I64Ctz; I64Const $3; I64ShrU; I64Add; Set R0; \
			Else; \
				Get R0; Get R9; I64Ctz; I64Const $3; I64ShrU; I64Add; Set R0; \
			End; \
		End; End; \
		NEEDMORE; \
		LOADC; \
		Get R6; I64Const $34; I64Eq; \
		If; INC(R0, 1); Br $2; End; \
		Get R6; I64Const $92; I64Eq; \
		If; \
			Get R15; I64Const $1; I64Or; Set R15; \
			Get R0; I64Const $1; I64Add; Get R1; I64GeU; If; GIVEUP; End; \
			BYTEAT(R0, 1, R7); \
			Get R7; I64Const $117; I64Eq; \
			If; \
				Get R0; I64Const $6; I64Add; Get R1; I64GtU; If; GIVEUP; End; \
				HEX(2); HEX(3); HEX(4); HEX(5); \
				INC(R0, 6); Br $2; \
			End; \
			Get R7; I64Const $34; I64Eq; \
			Get R7; I64Const $92; I64Eq; I32Or; \
			Get R7; I64Const $47; I64Eq; I32Or; \
			Get R7; I64Const $98; I64Eq; I32Or; \
			Get R7; I64Const $102; I64Eq; I32Or; \
			Get R7; I64Const $110; I64Eq; I32Or; \
			Get R7; I64Const $114; I64Eq; I32Or; \
			Get R7; I64Const $116; I64Eq; I32Or; \
			I32Eqz; If; GIVEUP; End; \
			INC(R0, 2); Br $1; \
		End; \
		Get R6; I64Const $32; I64LtU; If; GIVEUP; End; \
		Get R6; I64Const $128; I64GeU; \
		If; \
			Loop; \
				UTF8; \
				Get R0; Get R1; I64LtU; \
				If; LOADC; Get R6; I64Const $128; I64GeU; BrIf $1; End; \
			End; \
			Br $1; \
		End; \
		INC(R0, 1); Br $0; \
	End; End

// KEY moves R0 from where a member's key must start to its value, past
// the key, the colon and any whitespace.
#define KEY \
	NEEDMORE; LOADC; \
	Get R6; I64Const $34; I64Ne; If; GIVEUP; End; \
	STRING; \
	SKIPWS; \
	NEEDMORE; LOADC; \
	Get R6; I64Const $58; I64Ne; If; GIVEUP; End; \
	INC(R0, 1); \
	SKIPWS

// TOPLEVEL pushes whether a body is being scanned and the container
// stack holds only the top-level object.
#define TOPLEVEL \
	Get R11; I64Eqz; I32Eqz; \
	Get R3; Get R4; I64Sub; I64Const $1; I64Eq; I32And

// SLOT(k) pushes the i32 address of field k of the current record: out[1
// + 5*R13 + k], the fields being the member's index, key, value, value's
// end and the next member's key.
#define SLOT(k) \
	Get R11; Get R13; I64Const $40; I64Mul; I64Add; I64Const $(8+8*k); I64Add; I32WrapI64

// MEMBERKEY is KEY for a top-level member: it starts a record for it in
// the next slot, gives up on an escaped key, and marks a kv_hints key.
#define MEMBERKEY \
	INC(R12, 1); \
	Get R13; I64Eqz; I32Eqz; \
	If; \
		Get R11; Get R13; I64Const $40; I64Mul; I64Add; I64Const $-32; I64Add; I32WrapI64; I64Load $0; \
		Get R12; I64Const $1; I64Sub; I64Eq; \
		If; \
			Get R11; Get R13; I64Const $40; I64Mul; I64Add; I32WrapI64; \
			Get R0; Get R2; I64Sub; I64Store $0; \
		End; \
	End; \
	SLOT(0); Get R12; I64Store $0; \
	SLOT(1); Get R0; Get R2; I64Sub; I64Store $0; \
	I64Const $0; Set R15; \
	NEEDMORE; LOADC; \
	Get R6; I64Const $34; I64Ne; If; GIVEUP; End; \
	STRING; \
	Get R15; I64Eqz; I32Eqz; If; GIVEUP; End; \
	SLOT(1); I64Load $0; Get R2; I64Add; Set R7; \
	Get R0; Get R7; I64Sub; I64Const $10; I64Eq; \
	If; \
		Get R7; I32WrapI64; I64Load $0; I64Const $0x746e69685f766b22; I64Eq; \
		Get R7; I32WrapI64; I64Load16U $8; I64Const $0x2273; I64Eq; I32And; \
		If; I64Const $2; Set R15; End; \
	End; \
	SKIPWS; \
	NEEDMORE; LOADC; \
	Get R6; I64Const $58; I64Ne; If; GIVEUP; End; \
	INC(R0, 1); \
	SKIPWS; \
	SLOT(2); Get R0; Get R2; I64Sub; I64Store $0

// ANYKEY is MEMBERKEY at the top level of a body, KEY elsewhere.
#define ANYKEY \
	TOPLEVEL; If; MEMBERKEY; Else; KEY; End

// MEMBEREND closes the record of a top-level member whose value ended
// just before R0: a kv_hints member's record is kept (the next member's
// key unknown yet), any other member may be the first kept one.
#define MEMBEREND \
	Get R15; I64Const $2; I64And; I64Eqz; \
	If; \
		Get R14; I64Const $0; I64LtS; If; Get R12; Set R14; End; \
	Else; \
		Get R13; I64Const $4; I64GeU; If; GIVEUP; End; \
		SLOT(3); Get R0; Get R2; I64Sub; I64Store $0; \
		SLOT(4); I64Const $-1; I64Store $0; \
		INC(R13, 1); \
	End; \
	I64Const $0; Set R15

// PUSH(c) pushes the closer c on the container stack.
#define PUSH(c) \
	Get R3; Get R5; I64GeU; If; GIVEUP; End; \
	Get R3; I32WrapI64; I64Const $c; I64Store8 $0; \
	INC(R3, 1)

// OPEN(c) enters the container whose opening byte is at R0 and whose
// closer is c: an empty one is a value that ended ($after, three blocks
// out from where OPEN is used), any other has c pushed.
#define OPEN(c) \
	INC(R0, 1); \
	SKIPWS; \
	Get R0; Get R1; I64LtU; \
	If; \
		LOADC; Get R6; I64Const $c; I64Eq; \
		If; INC(R0, 1); Br $3; End; \
	End; \
	PUSH(c)

// LITERAL(n, load, want) checks that the n bytes at R0 are a keyword whose
// bytes after the first, loaded with load at offset 1 (or all of them at
// offset 0 when n is 4 or 8), equal want.
#define LITERAL(n, load, off, want) \
	Get R0; I64Const $n; I64Add; Get R1; I64GtU; If; GIVEUP; End; \
	Get R0; I32WrapI64; load $off; want; If; GIVEUP; End; \
	INC(R0, n)

// func quickScan(b []byte, i int, stack []byte, out []int64) int
//
// With an empty out, it validates the value at b[i] and returns the
// offset just past it. Otherwise b[i:] must be a JSON object, with only
// whitespace before and after, and out must hold 26 words (it gives up
// otherwise): it returns the number of top-level kv_hints members (at most
// 4), records them in out (see SLOT; the fifth record is scratch) and
// stores the index of the first other member, or -1, in out[0].
TEXT ·quickScan(SB), NOSPLIT, $0-88
	I64Load b_base+0(FP)
	Tee R2
	I64Load i+24(FP)
	I64Add
	Set R0
	Get R2
	I64Load b_len+8(FP)
	I64Add
	Set R1
	I64Load stack_base+32(FP)
	Tee R4
	Set R3
	Get R4
	I64Load stack_len+40(FP)
	I64Add
	Set R5
	I64Const $0
	Set R15

	I64Const $0
	Set R11
	I64Load out_len+64(FP)
	I64Eqz
	I32Eqz
	If // a body: an object is expected
		I64Load out_len+64(FP)
		I64Const $26
		I64LtU
		If
			GIVEUP
		End
		I64Load out_base+56(FP)
		Set R11
		I64Const $-1
		Set R12
		I64Const $0
		Set R13
		I64Const $-1
		Set R14
		SKIPWS
		NEEDMORE
		LOADC
		Get R6
		I64Const $123 // '{'
		I64Ne
		If
			GIVEUP
		End
	End

	Loop // $value: a value is expected at R0
		Block // $after: leaving it means a value ended just before R0
			NEEDMORE
			LOADC

			Get R6
			I64Const $34 // '"'
			I64Eq
			If
				STRING
				Br $1
			End

			Get R6
			I64Const $123 // '{'
			I64Eq
			If
				OPEN(125)
				ANYKEY
				Br $2 // $value
			End

			Get R6
			I64Const $91 // '['
			I64Eq
			If
				OPEN(93)
				Br $2 // $value
			End

			Get R6
			I64Const $116 // 't'
			I64Eq
			If
				LITERAL(4, I32Load, 0, I32Const $0x65757274; I32Ne) // "true"
				Br $1
			End
			Get R6
			I64Const $102 // 'f'
			I64Eq
			If
				LITERAL(5, I32Load, 1, I32Const $0x65736c61; I32Ne) // "alse"
				Br $1
			End
			Get R6
			I64Const $110 // 'n'
			I64Eq
			If
				LITERAL(4, I32Load, 0, I32Const $0x6c6c756e; I32Ne) // "null"
				Br $1
			End
			Get R6
			I64Const $78 // 'N'
			I64Eq
			If
				LITERAL(3, I32Load16U, 1, I32Const $0x4e61; I32Ne) // "aN"
				Br $1
			End
			Get R6
			I64Const $73 // 'I'
			I64Eq
			If
				LITERAL(8, I64Load, 0, I64Const $0x7974696e69666e49; I64Ne) // "Infinity"
				Br $1
			End

			// A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? or
			// -Infinity, the longest prefix (scanNumber).
			Get R6
			I64Const $45 // '-'
			I64Eq
			If
				INC(R0, 1)
				Get R0
				Get R1
				I64LtU
				If
					LOADC
					Get R6
					I64Const $73 // 'I'
					I64Eq
					If
						LITERAL(8, I64Load, 0, I64Const $0x7974696e69666e49; I64Ne)
						Br $3 // $after
					End
				End
				NEEDMORE
				LOADC
			End
			ISDIGIT(R6)
			I32Eqz
			If
				GIVEUP
			End
			INC(R0, 1)
			Get R6
			I64Const $48 // '0'
			I64Ne
			If
				DIGITS
			End
			// A fraction needs a digit after the point.
			Get R0
			I64Const $1
			I64Add
			Get R1
			I64LtU
			If
				Get R0
				I32WrapI64
				I64Load8U $0
				I64Const $46 // '.'
				I64Eq
				BYTEAT(R0, 1, R7)
				ISDIGIT(R7)
				I32And
				If
					INC(R0, 2)
					DIGITS
				End
			End
			// An exponent needs a digit after e, E and any sign.
			Get R0
			Get R1
			I64LtU
			If
				Get R0
				I32WrapI64
				I64Load8U $0
				I64Const $32
				I64Or
				I64Const $101 // 'e' or 'E'
				I64Eq
				If
					Get R0
					I64Const $1
					I64Add
					Set R7
					Get R7
					Get R1
					I64LtU
					If
						BYTEAT(R7, 0, R8)
						Get R8
						I64Const $43 // '+'
						I64Eq
						Get R8
						I64Const $45 // '-'
						I64Eq
						I32Or
						If
							INC(R7, 1)
						End
					End
					Get R7
					Get R1
					I64LtU
					If
						BYTEAT(R7, 0, R8)
						ISDIGIT(R8)
						If
							Get R7
							I64Const $1
							I64Add
							Set R0
							DIGITS
						End
					End
				End
			End
		End // $after

		// A value ended: close containers until one wants another element.
		Loop // $close
			TOPLEVEL
			If
				MEMBEREND
			End
			Get R3
			Get R4
			I64Eq
			If
				Get R11
				I64Eqz
				If
					Get SP
					Get R0
					Get R2
					I64Sub
					I64Store ret+80(FP)
					RET
				End
				SKIPWS
				Get R0
				Get R1
				I64Ne
				If
					GIVEUP
				End
				Get R11
				I32WrapI64
				Get R14
				I64Store $0
				Get SP
				Get R13
				I64Store ret+80(FP)
				RET
			End
			SKIPWS
			NEEDMORE
			LOADC
			Get R3
			I64Const $1
			I64Sub
			I32WrapI64
			I64Load8U $0
			Set R7 // the innermost container's closer
			Get R6
			Get R7
			I64Eq
			If
				Get R3
				I64Const $1
				I64Sub
				Set R3
				INC(R0, 1)
				Br $1 // $close
			End
			Get R6
			I64Const $44 // ','
			I64Ne
			If
				GIVEUP
			End
			INC(R0, 1)
			SKIPWS
			Get R7
			I64Const $125 // '}'
			I64Eq
			If
				ANYKEY
			End
			Br $1 // $value
		End // $close
	End // $value
	GIVEUP
