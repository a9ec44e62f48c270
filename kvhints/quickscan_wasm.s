#include "textflag.h"

// This file holds quickScan, the scanner of the wasm guest (driven by
// quick.go, declared in quickscan_wasm.go; natively quickscan_other.go is
// a stub): one compact loop over an explicit stack of closers, which reads what
// the Go scanner (scan.go, Rewriter.scanGo) reads and answers as it does,
// the same error code at the same offset included. It stops only at the
// end, at an error, when its records of kv_hints members are full, when
// its stack is full (the Go code grows it), or, for a body, before a
// top-level value that is not an object; the Go code resumes it where it
// stopped, so no byte is read twice.
//
// Locals (i64): R0 the next byte's address, R1 the end address, R2 the
// body's base address, R3 the stack's top, R4 its base, R5 its limit,
// R6 the current byte, R7 and R8 scratch, R9 and R10 word masks and
// scratch. When scanning a body: R11 the address of the records, R12 the
// index of the current top-level member, R13 the records filled, R14 the
// index of the first other member (-1 for none yet). R15 holds flags: 1
// an escape was seen in the current string, 2 the current top-level
// member is a kv_hints member, 4 a member's name comes next, 8 the name
// being read is a top-level member's. R11 is 0
// when skipping a single value. F16 holds the address of the current
// string's opening quote, as f64 bits.

// quickState's fields (quick.go), by offset; the records follow it.
#define ST_POS 0
#define ST_DEPTH 8
#define ST_CLOSER 16
#define ST_CODE 24
#define ST_BODY 32
#define ST_IDX 40
#define ST_FIRSTKEPT 48
#define ST_N 56
#define ST_FLAGS 64
#define ST_RECS 72

// The records' room (hintRecords).
#define RECORDS 64

// quickScan's answers (quickDone ...).
#define DONE 0
#define FULL 1
#define DEEP 2
#define ERROR 3
#define NOTOBJECT 4

// errCode (scan.go).
#define E_UNTERMINATED 1
#define E_CONTROL 2
#define E_UTF8 3
#define E_UESCAPE 4
#define E_ESCAPE 5
#define E_NUMBER 6
#define E_VALUE 7
#define E_END 8
#define E_COMMA 9
#define E_NAME 10
#define E_COLON 11
#define E_EXTRA 12
#define E_BLANK 13
#define E_INTDIGITS 14

// The most digits an integer literal may have (maxIntDigits).
#define MAXINTDIGITS 4300

// ST pushes the i32 address of the state.
#define ST \
	I64Load st+24(FP); I32WrapI64

// RETURN(s) returns s.
#define RETURN(s) \
	Get SP; I64Const $s; I64Store ret+56(FP); RET

// SAVE stores where the scan stands: R0, the stack's depth, and for a
// body the member index, the records filled, the first kept member and
// the flags (a member's value may be deeper than the stack).
#define SAVE \
	ST; Get R0; Get R2; I64Sub; I64Store $ST_POS; \
	ST; Get R3; Get R4; I64Sub; I64Store $ST_DEPTH; \
	ST; Get R12; I64Store $ST_IDX; \
	ST; Get R13; I64Store $ST_N; \
	ST; Get R14; I64Store $ST_FIRSTKEPT; \
	ST; Get R15; I64Store $ST_FLAGS

// FAILAT(code, r) reports the error code at the address in local r.
#define FAILAT(code, r) \
	ST; I64Const $code; I64Store $ST_CODE; \
	ST; Get r; Get R2; I64Sub; I64Store $ST_POS; \
	RETURN(ERROR)

// FAIL(code) reports the error code at R0.
#define FAIL(code) FAILAT(code, R0)

// NEEDMORE(code) fails with code unless R0 < R1.
#define NEEDMORE(code) \
	Get R0; Get R1; I64GeU; If; FAIL(code); End

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

// HEX(k) fails unless the byte at R0+k is a hex digit.
#define HEX(k) \
	BYTEAT(R0, k, R8); \
	ISDIGIT(R8); \
	Get R8; I64Const $32; I64Or; I64Const $97; I64Sub; I64Const $6; I64LtU; \
	I32Or; I32Eqz; If; FAIL(E_UESCAPE); End

// UTF8 moves R0 past the UTF-8 sequence whose first byte, at R0 and in
// R6, is not ASCII, and fails unless it is one that scanString accepts:
// what utf8.DecodeRune accepts (no overlong forms, nothing past U+10FFFF)
// and the encoded surrogates ED A0..BF 80..BF, which Python's json.loads
// reads. So after ED any continuation byte will do. R8 is its length, R9
// and R10 the range of its second byte.
#define UTF8 \
	Get R6; I64Const $0xC2; I64LtU; If; FAIL(E_UTF8); End; \
	I64Const $2; Set R8; I64Const $0x80; Set R9; I64Const $0xBF; Set R10; \
	Get R6; I64Const $0xE0; I64GeU; \
	If; \
		I64Const $3; Set R8; \
		Get R6; I64Const $0xE0; I64Eq; If; I64Const $0xA0; Set R9; End; \
	End; \
	Get R6; I64Const $0xF0; I64GeU; \
	If; \
		Get R6; I64Const $0xF5; I64GeU; If; FAIL(E_UTF8); End; \
		I64Const $4; Set R8; \
		Get R6; I64Const $0xF0; I64Eq; If; I64Const $0x90; Set R9; End; \
		Get R6; I64Const $0xF4; I64Eq; If; I64Const $0x8F; Set R10; End; \
	End; \
	Get R0; Get R8; I64Add; Get R1; I64GtU; If; FAIL(E_UTF8); End; \
	BYTEAT(R0, 1, R7); \
	Get R7; Get R9; I64LtU; Get R7; Get R10; I64GtU; I32Or; If; FAIL(E_UTF8); End; \
	Get R8; I64Const $3; I64GeU; \
	If; \
		Get R0; I32WrapI64; I64Load8U $2; I64Const $0xC0; I64And; I64Const $0x80; I64Ne; If; FAIL(E_UTF8); End; \
	End; \
	Get R8; I64Const $4; I64Eq; \
	If; \
		Get R0; I32WrapI64; I64Load8U $3; I64Const $0xC0; I64And; I64Const $0x80; I64Ne; If; FAIL(E_UTF8); End; \
	End; \
	Get R0; Get R8; I64Add; Set R0

// UTF8RUN is UTF8 with a fast path for the common two- and three-byte
// sequences away from the end of the body: their bytes are checked in one
// 32-bit load (little-endian, the lead is the low byte) against the
// pattern 110xxxxx 10xxxxxx with a lead of at least C2, or 1110xxxx
// 10xxxxxx 10xxxxxx with a lead other than E0, whose second byte has a
// narrower range. After ED any continuation byte will do, as in UTF8.
// Everything else (E0, four-byte sequences, errors, the last bytes of the
// body) goes through UTF8, which decides exactly.
#define UTF8RUN \
	Block; \
		Get R1; Get R0; I64Sub; I64Const $4; I64GeU; \
		If; \
			Get R0; I32WrapI64; I64Load32U $0; Set R7; \
			Get R7; I64Const $0xC0E0; I64And; I64Const $0x80C0; I64Eq; \
			Get R6; I64Const $0xC2; I64GeU; I32And; \
			If; INC(R0, 2); Br $2; End; \
			Get R7; I64Const $0xC0C0F0; I64And; I64Const $0x8080E0; I64Eq; \
			Get R6; I64Const $0xE0; I64Ne; I32And; \
			If; INC(R0, 3); Br $2; End; \
		End; \
		UTF8; \
	End

// STRING moves R0 from the opening quote of a string to just past its
// closing quote. Runs of plain bytes go 16 at a time, and a block holding
// a special byte is entered at that byte. Runs of multibyte characters,
// and the single spaces between words of such text, stay in one inner
// loop (UTF8RUN), so that text in another script is not sent back to the
// block loop at every character or word.
#define STRING \
	Get R0; F64ReinterpretI64; Set F16; \
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
		Get R0; Get R1; I64GeU; If; Get F16; I64ReinterpretF64; Set R7; FAILAT(E_UNTERMINATED, R7); End; \
		LOADC; \
		Get R6; I64Const $34; I64Eq; \
		If; INC(R0, 1); Br $2; End; \
		Get R6; I64Const $92; I64Eq; \
		If; \
			Get R15; I64Const $1; I64Or; Set R15; \
			Get R0; I64Const $1; I64Add; Get R1; I64GeU; If; FAIL(E_UNTERMINATED); End; \
			BYTEAT(R0, 1, R7); \
			Get R7; I64Const $117; I64Eq; \
			If; \
				Get R0; I64Const $6; I64Add; Get R1; I64GtU; If; FAIL(E_UESCAPE); End; \
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
			I32Eqz; If; FAIL(E_ESCAPE); End; \
			INC(R0, 2); Br $1; \
		End; \
		Get R6; I64Const $32; I64LtU; If; FAIL(E_CONTROL); End; \
		Get R6; I64Const $128; I64GeU; \
		If; \
			Loop; \
				UTF8RUN; \
				Get R0; Get R1; I64LtU; \
				If; \
					LOADC; Get R6; I64Const $128; I64GeU; BrIf $1; \
					Get R6; I64Const $32; I64Eq; \
					Get R0; I64Const $1; I64Add; Get R1; I64LtU; I32And; \
					If; \
						BYTEAT(R0, 1, R7); \
						Get R7; I64Const $128; I64GeU; \
						If; INC(R0, 1); Get R7; Set R6; Br $3; End; \
					End; \
				End; \
			End; \
			Br $1; \
		End; \
		INC(R0, 1); Br $0; \
	End; End

// TOPLEVEL pushes whether a body is being scanned and the container
// stack holds only the top-level object.
#define TOPLEVEL \
	Get R11; I64Eqz; I32Eqz; \
	Get R3; Get R4; I64Sub; I64Const $1; I64Eq; I32And

// SLOT(k) pushes the i32 address of field k of the current record, the
// member struct recs[R13] (rewrite.go): index, key, value, value's end,
// next member's key, 8 bytes each.
#define SLOT(k) \
	Get R11; Get R13; I64Const $40; I64Mul; I64Add; I64Const $(8*k); I64Add; I32WrapI64

// KEYMATCH sets R15 to 2 when the name whose literal, with an escape,
// starts at the current record's key and ends just before R0 decodes to
// kv_hints, as Python would decode it. STRING has checked its escapes.
// Every byte of kv_hints is ASCII and no simple escape stands for one of
// them, so each escape or raw byte either is the next byte of the name
// or ends the match; the loop reads at most nine characters. R8 walks
// the literal, R9 counts the bytes matched (9: none will match), R7 is
// the character read.
#define KEYMATCH \
	SLOT(1); I64Load $0; Get R2; I64Add; I64Const $1; I64Add; Set R8; \
	I64Const $0; Set R9; \
	Block; Loop; \
		Get R8; Get R0; I64Const $1; I64Sub; I64GeU; BrIf $1; \
		Get R9; I64Const $8; I64GeU; If; I64Const $9; Set R9; Br $2; End; \
		BYTEAT(R8, 0, R7); \
		Get R7; I64Const $92; I64Eq; \
		If; \
			BYTEAT(R8, 1, R7); \
			Get R7; I64Const $117; I64Eq; \
			If; \
				I64Const $0; Set R7; \
				HEXVAL(2); HEXVAL(3); HEXVAL(4); HEXVAL(5); \
				INC(R8, 6); \
			Else; \
				I64Const $0; Set R7; \
				INC(R8, 2); \
			End; \
		Else; \
			INC(R8, 1); \
		End; \
		Get R7; \
		I64Const $0x73746e69685f766b; Get R9; I64Const $3; I64Shl; I64ShrU; I64Const $255; I64And; \
		I64Ne; If; I64Const $9; Set R9; Br $2; End; \
		INC(R9, 1); Br $0; \
	End; End; \
	Get R9; I64Const $8; I64Eq; If; Get R15; I64Const $2; I64Or; Set R15; End

// HEXVAL(k) shifts the value of the hex digit at R8+k into R7: the low
// nibble, plus 9 for a letter (bit 6 set).
#define HEXVAL(k) \
	BYTEAT(R8, k, R10); \
	Get R7; I64Const $4; I64Shl; \
	Get R10; I64Const $15; I64And; I64Or; \
	Get R10; I64Const $6; I64ShrU; I64Const $9; I64Mul; I64Add; \
	Set R7

// MEMBERSTART starts a top-level member whose name starts at R0. It
// first completes the record of the member before when that was a
// kv_hints member (its next member's key is here), returns FULL when the
// records are full (the Go code takes them and resumes here), then starts
// a record in the next slot.
#define MEMBERSTART \
	INC(R12, 1); \
	Get R13; I64Eqz; I32Eqz; \
	If; \
		Get R11; Get R13; I64Const $40; I64Mul; I64Add; I64Const $-40; I64Add; I32WrapI64; I64Load $0; \
		Get R12; I64Const $1; I64Sub; I64Eq; \
		If; \
			Get R11; Get R13; I64Const $40; I64Mul; I64Add; I64Const $-8; I64Add; I32WrapI64; \
			Get R0; Get R2; I64Sub; I64Store $0; \
		End; \
	End; \
	Get R13; I64Const $RECORDS; I64GeU; \
	If; \
		Get R12; I64Const $1; I64Sub; Set R12; \
		Get R3; I64Const $1; I64Sub; Set R3; \
		SAVE; \
		ST; I64Const $125; I64Store $ST_CLOSER; \
		RETURN(FULL); \
	End; \
	SLOT(0); Get R12; I64Store $0; \
	SLOT(1); Get R0; Get R2; I64Sub; I64Store $0; \
	I64Const $8; Set R15

// HINTNAME marks (flag 2) a top-level member whose name, just read,
// decodes to kv_hints: byte for byte when it has no escape, else through
// KEYMATCH.
#define HINTNAME \
	Get R15; I64Const $1; I64And; I64Eqz; \
	If; \
		SLOT(1); I64Load $0; Get R2; I64Add; Set R7; \
		Get R0; Get R7; I64Sub; I64Const $10; I64Eq; \
		If; \
			Get R7; I32WrapI64; I64Load $0; I64Const $0x746e69685f766b22; I64Eq; \
			Get R7; I32WrapI64; I64Load16U $8; I64Const $0x2273; I64Eq; I32And; \
			If; Get R15; I64Const $2; I64Or; Set R15; End; \
		End; \
	Else; \
		KEYMATCH; \
	End

// ISTOPNAME pushes whether the name being read is a top-level member's.
#define ISTOPNAME \
	Get R15; I64Const $8; I64And; I64Eqz; I32Eqz

// ANYKEY moves R0 from where a member's name must start to its value,
// past the name, the colon and any whitespace. At the top level of a body
// it also keeps the member's record (MEMBERSTART, HINTNAME), with flag 8
// set while it reads the name.
#define ANYKEY \
	TOPLEVEL; If; MEMBERSTART; End; \
	NEEDMORE(E_NAME); LOADC; \
	Get R6; I64Const $34; I64Ne; If; FAIL(E_NAME); End; \
	STRING; \
	ISTOPNAME; If; HINTNAME; End; \
	SKIPWS; \
	NEEDMORE(E_COLON); LOADC; \
	Get R6; I64Const $58; I64Ne; If; FAIL(E_COLON); End; \
	INC(R0, 1); \
	SKIPWS; \
	ISTOPNAME; \
	If; \
		SLOT(2); Get R0; Get R2; I64Sub; I64Store $0; \
		Get R15; I64Const $-9; I64And; Set R15; \
	End

// WANTKEY has the next turn of the main loop read a member's name first.
#define WANTKEY \
	Get R15; I64Const $4; I64Or; Set R15

// MEMBEREND closes the record of a top-level member whose value ended
// just before R0: a kv_hints member's record is kept (the next member's
// key unknown yet), any other member may be the first kept one.
#define MEMBEREND \
	Get R15; I64Const $2; I64And; I64Eqz; \
	If; \
		Get R14; I64Const $0; I64LtS; If; Get R12; Set R14; End; \
	Else; \
		SLOT(3); Get R0; Get R2; I64Sub; I64Store $0; \
		SLOT(4); I64Const $-1; I64Store $0; \
		INC(R13, 1); \
	End; \
	I64Const $0; Set R15

// PUSH(c) pushes the closer c on the container stack, or, when it is
// full, returns DEEP with c to push on resuming.
#define PUSH(c) \
	Get R3; Get R5; I64GeU; \
	If; \
		SAVE; \
		ST; I64Const $c; I64Store $ST_CLOSER; \
		RETURN(DEEP); \
	End; \
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

// LITERAL(n, load, off, want, fail) checks that the n bytes at R0 are a
// keyword whose bytes after the first, loaded with load at offset 1 (or
// all of them at offset 0 when n is 4 or 8), equal want; else it fails.
#define LITERAL(n, load, off, want, fail) \
	Get R0; I64Const $n; I64Add; Get R1; I64GtU; If; fail; End; \
	Get R0; I32WrapI64; load $off; want; If; fail; End; \
	INC(R0, n)

// func quickScan(b []byte, st *quickState, stack []byte) int
//
// It starts at b[st.pos] with the stack holding st.depth closers, first
// pushing st.closer if set (and reading a name after '}'). With st.body
// 0 it skips one value and answers DONE with st.pos just past it. With
// st.body 1 it reads a body: a top-level object (anything else answers
// NOTOBJECT at it) then only whitespace, recording each top-level kv_hints
// member as a member struct after the state, in st.n of RECORDS slots,
// with the index of the first other member in st.firstKept. See quick.go
// for the answers.
TEXT ·quickScan(SB), NOSPLIT, $0-64
	I64Load b_base+0(FP)
	Set R2
	Get R2
	I64Load b_len+8(FP)
	I64Add
	Set R1
	ST
	I64Load $ST_POS
	Get R2
	I64Add
	Set R0
	I64Load stack_base+32(FP)
	Set R4
	Get R4
	I64Load stack_len+40(FP)
	I64Add
	Set R5
	ST
	I64Load $ST_DEPTH
	Get R4
	I64Add
	Set R3
	ST
	I64Load $ST_IDX
	Set R12
	ST
	I64Load $ST_N
	Set R13
	ST
	I64Load $ST_FIRSTKEPT
	Set R14
	ST
	I64Load $ST_FLAGS
	Set R15
	I64Const $0
	Set R11
	ST
	I64Load $ST_BODY
	I64Eqz
	I32Eqz
	If
		I64Load st+24(FP)
		I64Const $ST_RECS
		I64Add
		Set R11
	End

	ST
	I64Load $ST_CLOSER
	Set R7
	Get R7
	I64Eqz
	If
		Get R11
		I64Eqz
		I32Eqz
		If // a body: an object is expected
			SKIPWS
			Get R0
			Get R1
			I64GeU
			If
				FAIL(E_BLANK)
			End
			LOADC
			Get R6
			I64Const $123 // '{'
			I64Ne
			If
				SAVE
				Get SP
				I64Const $4 // NOTOBJECT
				I64Store ret+56(FP)
				RET
			End
		End
	Else // resuming: push the closer; a name follows '{'
		Get R3
		Get R5
		I64GeU
		If
			SAVE
			Get SP
			I64Const $2 // DEEP
			I64Store ret+56(FP)
			RET
		End
		Get R3
		I32WrapI64
		Get R7
		I64Store8 $0
		INC(R3, 1)
		Get R7
		I64Const $125 // '}'
		I64Eq
		If
			WANTKEY
		End
	End

	Loop // $value: a value, or with flag 4 a member's name, is expected at R0
		Get R15
		I64Const $4
		I64And
		I64Eqz
		I32Eqz
		If
			Get R15
			I64Const $-5
			I64And
			Set R15
			ANYKEY
		End
		Block // $after: leaving it means a value ended just before R0
			NEEDMORE(E_VALUE)
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
				WANTKEY
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
				LITERAL(4, I32Load, 0, I32Const $0x65757274; I32Ne, FAIL(E_VALUE)) // "true"
				Br $1
			End
			Get R6
			I64Const $102 // 'f'
			I64Eq
			If
				LITERAL(5, I32Load, 1, I32Const $0x65736c61; I32Ne, FAIL(E_VALUE)) // "alse"
				Br $1
			End
			Get R6
			I64Const $110 // 'n'
			I64Eq
			If
				LITERAL(4, I32Load, 0, I32Const $0x6c6c756e; I32Ne, FAIL(E_VALUE)) // "null"
				Br $1
			End
			Get R6
			I64Const $78 // 'N'
			I64Eq
			If
				LITERAL(3, I32Load16U, 1, I32Const $0x4e61; I32Ne, FAIL(E_VALUE)) // "aN"
				Br $1
			End
			Get R6
			I64Const $73 // 'I'
			I64Eq
			If
				LITERAL(8, I64Load, 0, I64Const $0x7974696e69666e49; I64Ne, FAIL(E_VALUE)) // "Infinity"
				Br $1
			End

			// A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? or
			// -Infinity, the longest prefix (scanNumber). R7 is its start:
			// past a minus sign, what is wrong is the number. R10 keeps the
			// start too, and R9 gets the end of the integer digits, for the
			// check of an integer's length at the end.
			Get R0
			Set R7
			Get R0
			Set R10
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
						LITERAL(8, I64Load, 0, I64Const $0x7974696e69666e49; I64Ne, FAILAT(E_NUMBER, R7))
						Br $3 // $after
					End
				End
				Get R0
				Get R1
				I64GeU
				If
					FAILAT(E_NUMBER, R7)
				End
				LOADC
			End
			ISDIGIT(R6)
			I32Eqz
			If
				Get R0
				Get R7
				I64Ne
				If
					FAILAT(E_NUMBER, R7)
				End
				FAIL(E_VALUE)
			End
			INC(R0, 1)
			Get R6
			I64Const $48 // '0'
			I64Ne
			If
				DIGITS
			End
			Get R0
			Set R9
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
			// Nothing after the integer digits: an integer, which Python
			// cannot convert past MAXINTDIGITS digits, the sign not counted.
			Get R0
			Get R9
			I64Eq
			If
				Get R9
				Get R10
				I64Sub
				BYTEAT(R10, 0, R8)
				Get R8
				I64Const $45 // '-'
				I64Eq
				I64ExtendI32U
				I64Sub
				I64Const $MAXINTDIGITS
				I64GtU
				If
					FAILAT(E_INTDIGITS, R10)
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
					SAVE
					Get SP
					I64Const $0 // DONE
					I64Store ret+56(FP)
					RET
				End
				SKIPWS
				Get R0
				Get R1
				I64Ne
				If
					FAIL(E_EXTRA)
				End
				SAVE
				Get SP
				I64Const $0 // DONE
				I64Store ret+56(FP)
				RET
			End
			SKIPWS
			Get R0
			Get R1
			I64GeU
			If
				// scanGo and skipValue word the end of the body differently.
				TOPLEVEL
				If
					FAIL(E_COMMA)
				End
				FAIL(E_END)
			End
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
				FAIL(E_COMMA)
			End
			INC(R0, 1)
			SKIPWS
			Get R7
			I64Const $125 // '}'
			I64Eq
			If
				WANTKEY
			End
			Br $1 // $value
		End // $close
	End // $value
	Get SP
	I64Const $3 // ERROR
	I64Store ret+56(FP)
	RET
