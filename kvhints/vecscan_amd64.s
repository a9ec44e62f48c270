#include "textflag.h"

// stringRunAVX2: see vecscan_amd64.go for what it returns.
//
// Registers: SI the bytes, BX their length, R11 the offset of the last
// whole block, DI the block's offset, R8 how many bytes at the start of
// the block belong to an escape begun in the block before, R9 the flags
// (and 0x100: read escapes), R10 not zero when the last block validated
// had a byte above 0x7F (zero: nothing carried into the next). Y0 is the
// last block validated (outside u8loop and u8one), Y1 the block read;
// Y7..Y11 and Y13..Y15 hold constants. Escapes are ASCII, so UTF-8 is
// validated across them as if they were text; within a block the
// specials are taken in turn, each escape clearing the specials it
// covers. Blocks of plain ASCII after ASCII take the first loop; a block
// whose escapes are all simple and inside it, and whose UTF-8 is clean,
// escfast; a run of blocks with multibyte characters, u8loop, two blocks
// a turn, a pair whose only specials are simple escapes read at once
// (u8esc); the rest goes through trouble.
//
// UTF-8 is validated with three 16-entry tables indexed by the nibbles of
// each byte and the byte before it (prev1); their AND has a bit set for
// every way the pair is malformed:
//
//	0x01 a lead not followed by a continuation byte
//	0x02 a continuation byte after ASCII
//	0x04 E0 80..9F (overlong)
//	0x08 F4 90..BF, F5..FF 90..BF (above U+10FFFF)
//	0x10 ED A0..BF, a surrogate: read, and reported in the flags
//	0x20 C0 or C1 before a continuation byte (overlong)
//	0x40 F0 80..8F (overlong), F5..FF 80..8F (above U+10FFFF)
//	0x80 two continuation bytes: right exactly where the byte two before
//	     is E0..FF or the byte three before F0..FF
//
// Bytes F5..FF and C0, C1 are thereby never read, as in multibyteRun.

DATA tabHigh1<>+0(SB)/8, $0x0202020202020202
DATA tabHigh1<>+8(SB)/8, $0x4915012180808080
DATA tabHigh1<>+16(SB)/8, $0x0202020202020202
DATA tabHigh1<>+24(SB)/8, $0x4915012180808080
GLOBL tabHigh1<>(SB), RODATA|NOPTR, $32

DATA tabLow1<>+0(SB)/8, $0xCBCBCB8B8383A3E7
DATA tabLow1<>+8(SB)/8, $0xCBCBDBCBCBCBCBCB
DATA tabLow1<>+16(SB)/8, $0xCBCBCB8B8383A3E7
DATA tabLow1<>+24(SB)/8, $0xCBCBDBCBCBCBCBCB
GLOBL tabLow1<>(SB), RODATA|NOPTR, $32

DATA tabHigh2<>+0(SB)/8, $0x0101010101010101
DATA tabHigh2<>+8(SB)/8, $0x01010101BABAAEE6
DATA tabHigh2<>+16(SB)/8, $0x0101010101010101
DATA tabHigh2<>+24(SB)/8, $0x01010101BABAAEE6
GLOBL tabHigh2<>(SB), RODATA|NOPTR, $32

// Bit 0x80, and the error bits other than 0x10, in every byte.
DATA bit80<>+0(SB)/8, $0x8080808080808080
DATA bit80<>+8(SB)/8, $0x8080808080808080
DATA bit80<>+16(SB)/8, $0x8080808080808080
DATA bit80<>+24(SB)/8, $0x8080808080808080
GLOBL bit80<>(SB), RODATA|NOPTR, $32

DATA errBits<>+0(SB)/8, $0xEFEFEFEFEFEFEFEF
DATA errBits<>+8(SB)/8, $0xEFEFEFEFEFEFEFEF
DATA errBits<>+16(SB)/8, $0xEFEFEFEFEFEFEFEF
DATA errBits<>+24(SB)/8, $0xEFEFEFEFEFEFEFEF
GLOBL errBits<>(SB), RODATA|NOPTR, $32

// '"' at index 2, '\\' at 0x0C, else 0x80: VPSHUFB by a byte below 0x80
// gives the byte itself exactly when it is one of the two.
DATA quoteSlash<>+0(SB)/8, $0x8080808080228080
DATA quoteSlash<>+8(SB)/8, $0x8080805C80808080
DATA quoteSlash<>+16(SB)/8, $0x8080808080228080
DATA quoteSlash<>+24(SB)/8, $0x8080805C80808080
GLOBL quoteSlash<>(SB), RODATA|NOPTR, $32

// escfast's tables: escLow by a byte's low nibble and escHigh by its high
// one have a bit in common exactly for the bytes that make a simple escape
// after a backslash, other than the backslash: '"' and '/' (high nibble 2,
// bit 0x01), b, f, n (6, 0x02), r and t (7, 0x04).
DATA escLow<>+0(SB)/8, $0x0002000400070000
DATA escLow<>+8(SB)/8, $0x0102000000000000
DATA escLow<>+16(SB)/8, $0x0002000400070000
DATA escLow<>+24(SB)/8, $0x0102000000000000
GLOBL escLow<>(SB), RODATA|NOPTR, $32

DATA escHigh<>+0(SB)/8, $0x0402000000010000
DATA escHigh<>+8(SB)/8, $0x0000000000000000
DATA escHigh<>+16(SB)/8, $0x0402000000010000
DATA escHigh<>+24(SB)/8, $0x0000000000000000
GLOBL escHigh<>(SB), RODATA|NOPTR, $32

DATA quote<>+0(SB)/8, $0x2222222222222222
DATA quote<>+8(SB)/8, $0x2222222222222222
DATA quote<>+16(SB)/8, $0x2222222222222222
DATA quote<>+24(SB)/8, $0x2222222222222222
GLOBL quote<>(SB), RODATA|NOPTR, $32

DATA backslash<>+0(SB)/8, $0x5C5C5C5C5C5C5C5C
DATA backslash<>+8(SB)/8, $0x5C5C5C5C5C5C5C5C
DATA backslash<>+16(SB)/8, $0x5C5C5C5C5C5C5C5C
DATA backslash<>+24(SB)/8, $0x5C5C5C5C5C5C5C5C
GLOBL backslash<>(SB), RODATA|NOPTR, $32

// The bytes VPBROADCASTB fills Y15, Y14, Y8 and Y7 with. From memory, not
// through a general register: MOVQ into an X register is a legacy SSE
// instruction, and one run while the upper halves of the Y registers are
// in use costs a state transition (hundreds of cycles a call here).
DATA splat<>+0(SB)/4, $0x7060200F
GLOBL splat<>(SB), RODATA|NOPTR, $4

// UTF8CHECK(prev, cur) validates the block cur after prev: Y4 is not
// zero where a byte is malformed or the second of a surrogate (bit 0x10),
// Y5 holds the error bits; Y3 and Y6 are clobbered.
#define UTF8CHECK(prev, cur) \
	VPERM2I128 $0x21, cur, prev, Y6 \ // the last 16 bytes before, the first 16 of the block
	VPALIGNR   $14, Y6, cur, Y4   \ // prev2
	VPALIGNR   $13, Y6, cur, Y5   \ // prev3
	VPSUBUSB   Y8, Y4, Y4         \ // prev2 E0..FF: 80..9F
	VPSUBUSB   Y7, Y5, Y5         \ // prev3 F0..FF: 80..8F
	VPOR       Y4, Y5, Y4         \ // bit 0x80: must be a continuation byte
	VPALIGNR   $15, Y6, cur, Y3   \ // prev1
	VPSRLW     $4, Y3, Y5         \
	VPAND      Y15, Y5, Y5        \
	VPSHUFB    Y5, Y11, Y5        \ // by prev1's high nibble
	VPAND      Y15, Y3, Y3        \
	VPSHUFB    Y3, Y10, Y3        \ // by prev1's low nibble
	VPAND      Y3, Y5, Y5         \
	VPSRLW     $4, cur, Y3        \
	VPAND      Y15, Y3, Y3        \
	VPSHUFB    Y3, Y9, Y3         \ // by the byte's high nibble
	VPAND      Y3, Y5, Y5         \ // the error bits
	VPAND      bit80<>(SB), Y4, Y4 \
	VPXOR      Y5, Y4, Y4

// SPECIALS(cur, out, tmp): out is not zero where cur has '"', '\\' (0xFF
// there) or a control byte (0x01..0x20).
#define SPECIALS(cur, out, tmp) \
	VPSHUFB  cur, Y13, out \
	VPCMPEQB cur, out, out \
	VPSUBUSB cur, Y14, tmp \
	VPOR     tmp, out, out

// UTF8MEM(p1, p2, p3, cur, out, ta, tb) is UTF8CHECK for the block cur
// at DI+p1+1 with the bytes before it loaded from memory, p1, p2, p3 the
// offsets of prev1, prev2, prev3 from DI (so DI+p3 ≥ 0): loads instead
// of shuffles, which the validator is short of. out is not zero where a
// byte is malformed or the second of a surrogate, tb holds the error
// bits; ta is clobbered.
#define UTF8MEM(p1, p2, p3, cur, out, ta, tb) \
	VMOVDQU  p1(SI)(DI*1), ta \ // prev1
	VPSRLW   $4, ta, tb         \
	VPAND    Y15, tb, tb        \
	VPSHUFB  tb, Y11, tb        \ // by prev1's high nibble
	VPAND    Y15, ta, ta        \
	VPSHUFB  ta, Y10, ta        \ // by prev1's low nibble
	VPAND    ta, tb, tb         \
	VPSRLW   $4, cur, ta        \
	VPAND    Y15, ta, ta        \
	VPSHUFB  ta, Y9, ta         \ // by the byte's high nibble
	VPAND    ta, tb, tb         \ // the error bits
	VMOVDQU  p2(SI)(DI*1), ta \ // prev2
	VPSUBUSB Y8, ta, ta         \ // E0..FF: 80..9F
	VMOVDQU  p3(SI)(DI*1), out \ // prev3
	VPSUBUSB Y7, out, out       \ // F0..FF: 80..8F
	VPOR     ta, out, out       \ // bit 0x80: must be a continuation byte
	VPAND    bit80<>(SB), out, out \
	VPXOR    tb, out, out

// func stringRunAVX2(b []byte, escapes bool) (n, flags int)
TEXT ·stringRunAVX2(SB), NOSPLIT, $0-48
	MOVQ    b_base+0(FP), SI
	MOVQ    b_len+8(FP), BX
	MOVBQZX escapes+24(FP), R9
	SHLQ    $8, R9
	LEAQ    -32(BX), R11
	XORL    DI, DI
	XORL    R8, R8
	XORL    R10, R10
	VMOVDQU tabHigh1<>(SB), Y11
	VMOVDQU tabLow1<>(SB), Y10
	VMOVDQU tabHigh2<>(SB), Y9
	VMOVDQU quoteSlash<>(SB), Y13
	VPBROADCASTB splat<>+0(SB), Y15
	VPBROADCASTB splat<>+1(SB), Y14
	VPBROADCASTB splat<>+2(SB), Y8
	VPBROADCASTB splat<>+3(SB), Y7
	VPXOR   Y0, Y0, Y0

loop:
	CMPQ      DI, R11
	JGT       tail
	VMOVDQU   (SI)(DI*1), Y1
	VPSHUFB   Y1, Y13, Y2
	VPCMPEQB  Y1, Y2, Y2  // '"' or '\\'
	VPCMPGTB  Y1, Y14, Y3 // below 0x20, or above 0x7F
	VPOR      Y2, Y3, Y3
	VPMOVMSKB Y3, AX
	ORL       R10, AX
	JNZ       slow
	XORL      R8, R8
	ADDQ      $32, DI
	JMP       loop

slow:
	VPMOVMSKB Y1, CX // the bytes above 0x7F
	MOVL      CX, AX
	ORL       R10, AX
	JNZ       utf8

	// ASCII after ASCII: specials, and nothing malformed.
	VPMOVMSKB Y3, DX
	XORL      R12, R12
	TESTL     R8, R8
	JNZ       skip
	BTQ       $8, R9
	JCC       skip

	// Escapes read a block at once (escfast): lone backslashes, each
	// followed in the block by a byte simpleEscape accepts other than
	// '\\', and no control byte or '"' of the text's own. Anything else,
	// \u included, takes trouble's turns, which read the same block the
	// same way. DX: the specials; Y2's high bits: '"' and '\\'. From
	// u8trouble too, for a block with multibyte characters (R10 not zero).
escfast:
	VPCMPEQB  backslash<>(SB), Y1, Y4
	VPMOVMSKB Y4, AX   // backslashes
	TESTL     AX, AX
	JZ        skip     // none: the string ends in the block
	VPMOVMSKB Y2, R13  // '"' and '\\'
	ANDNL     DX, R13, R14
	JNZ       skip     // control bytes
	BTL       $31, AX
	JCS       skip     // an escape that ends in the next block
	LEAL      (AX)(AX*1), R14 // the escaped bytes
	TESTL     AX, R14
	JNZ       skip     // '\\' after '\\'
	ANDNL     R13, AX, R13    // the quotes
	ANDNL     R13, R14, R13
	JNZ       skip     // a quote not escaped: the end of the string
	VPAND     Y15, Y1, Y5
	VMOVDQU   escLow<>(SB), Y6
	VPSHUFB   Y5, Y6, Y5      // by the byte's low nibble
	VPSRLW    $4, Y1, Y6
	VPAND     Y15, Y6, Y6
	VMOVDQU   escHigh<>(SB), Y12
	VPSHUFB   Y6, Y12, Y6     // by its high nibble
	VPAND     Y5, Y6, Y5      // not zero: '"', '/', b, f, n, r or t
	VPXOR     Y6, Y6, Y6
	VPCMPEQB  Y6, Y5, Y5
	VPMOVMSKB Y5, R13
	TESTL     R13, R14
	JNZ       skip     // \u, or an escape that is not one
	ORQ       $1, R9
	TESTL     R10, R10
	JZ        next
	ADDQ      $32, DI
	JMP       u8loop

utf8:
	MOVL     CX, R10
	VPSUBUSB Y1, Y14, Y4
	VPOR     Y4, Y2, Y2 // the specials where not zero
	UTF8CHECK(Y0, Y1)
	VMOVDQU  Y1, Y0
	VPOR     Y2, Y4, Y3
	VPTEST   Y3, Y3
	JZ       utf8clean
	TESTL    R8, R8
	JZ       u8trouble // R10 is set
	JMP      masks     // the first R8 bytes end an escape

utf8clean:
	TESTL    R10, R10
	JZ       next
	XORL     R8, R8
	ADDQ     $32, DI

u8loop:
	// Text with multibyte characters: two blocks a turn while they are
	// clean and the second is not all ASCII. DI ≥ 32 here, so the bytes
	// before a block are loaded, and Y0 is free until this leaves, when
	// it becomes the last block again. A pair in trouble is read by
	// u8esc when its only specials are simple escapes, else a block at a
	// time by u8one.
	LEAQ     32(DI), AX
	CMPQ     AX, R11
	JGT      u8one
	VMOVDQU  (SI)(DI*1), Y1
	VMOVDQU  32(SI)(DI*1), Y12
	UTF8MEM(-1, -2, -3, Y1, Y2, Y3, Y4)
	UTF8MEM(31, 30, 29, Y12, Y5, Y3, Y4)
	VPOR     Y5, Y2, Y2 // malformed or a surrogate in either
	SPECIALS(Y1, Y3, Y4)
	SPECIALS(Y12, Y5, Y4)
	VPOR     Y5, Y3, Y3
	VPOR     Y3, Y2, Y4
	VPTEST   Y4, Y4
	JNZ      u8esc
	ADDQ     $64, DI
	VPTEST   bit80<>(SB), Y12
	JNZ      u8loop
	VMOVDQU  Y12, Y0
	XORL     R10, R10
	JMP      loop

u8esc:
	// Both blocks' UTF-8 clean, no control byte, and escapes read: the
	// pair's backslashes (AX) and quotes (CX) as escfast reads a block.
	VPTEST    Y2, Y2
	JNZ       u8one
	BTQ       $8, R9
	JCC       u8one
	VPSUBUSB  Y1, Y14, Y3
	VPSUBUSB  Y12, Y14, Y4
	VPOR      Y3, Y4, Y3
	VPTEST    Y3, Y3
	JNZ       u8one // a control byte
	VPCMPEQB  backslash<>(SB), Y1, Y3
	VPMOVMSKB Y3, AX
	VPCMPEQB  backslash<>(SB), Y12, Y4
	VPMOVMSKB Y4, DX
	SHLQ      $32, DX
	ORQ       DX, AX
	BTQ       $63, AX
	JCS       u8one // an escape that ends in the next pair
	LEAQ      (AX)(AX*1), R14 // the escaped bytes
	TESTQ     AX, R14
	JNZ       u8one // '\\' after '\\'
	VPCMPEQB  quote<>(SB), Y1, Y3
	VPMOVMSKB Y3, CX
	VPCMPEQB  quote<>(SB), Y12, Y4
	VPMOVMSKB Y4, DX
	SHLQ      $32, DX
	ORQ       DX, CX
	ANDNQ     CX, R14, CX
	JNZ       u8one // a quote not escaped: the end of the string
	VMOVDQU   escLow<>(SB), Y5
	VMOVDQU   escHigh<>(SB), Y6
	VPXOR     Y0, Y0, Y0
	VPAND     Y15, Y1, Y3
	VPSHUFB   Y3, Y5, Y3
	VPSRLW    $4, Y1, Y4
	VPAND     Y15, Y4, Y4
	VPSHUFB   Y4, Y6, Y4
	VPAND     Y3, Y4, Y3
	VPCMPEQB  Y0, Y3, Y3
	VPMOVMSKB Y3, CX // not '"', '/', b, f, n, r or t
	VPAND     Y15, Y12, Y3
	VPSHUFB   Y3, Y5, Y3
	VPSRLW    $4, Y12, Y4
	VPAND     Y15, Y4, Y4
	VPSHUFB   Y4, Y6, Y4
	VPAND     Y3, Y4, Y3
	VPCMPEQB  Y0, Y3, Y3
	VPMOVMSKB Y3, DX
	SHLQ      $32, DX
	ORQ       DX, CX
	TESTQ     CX, R14
	JNZ       u8one // \u, or an escape that is not one
	ORQ       $1, R9
	ADDQ      $64, DI
	VPTEST    bit80<>(SB), Y12
	JNZ       u8loop
	VMOVDQU   Y12, Y0
	XORL      R10, R10
	JMP       loop

u8one:
	// One block, DI ≥ 32.
	CMPQ     DI, R11
	JGT      tail
	VMOVDQU  (SI)(DI*1), Y1
	UTF8MEM(-1, -2, -3, Y1, Y4, Y3, Y5)
	SPECIALS(Y1, Y2, Y3)
	VPOR     Y2, Y4, Y3
	VPTEST   Y3, Y3
	JNZ      u8trouble1
	ADDQ     $32, DI
	VPTEST   bit80<>(SB), Y1
	JNZ      u8loop
	VMOVDQU  Y1, Y0
	XORL     R10, R10
	JMP      loop

u8trouble1:
	VMOVDQU   Y1, Y0
	VPMOVMSKB Y1, R10

u8trouble:
	// R10: the block's bytes above 0x7F. When its UTF-8 is clean (no
	// surrogate either) and escapes are read, only specials: escfast may
	// read the block at once, with nothing malformed (CX) and no
	// surrogate (R12) for trouble if it cannot. R8 is zero here.
	VPTEST    Y4, Y4
	JNZ       masks
	BTQ       $8, R9
	JCC       masks
	VPXOR     Y6, Y6, Y6
	VPCMPEQB  Y6, Y2, Y3
	VPMOVMSKB Y3, DX
	NOTL      DX // specials
	XORL      CX, CX
	XORL      R12, R12
	JMP       escfast

next:
	XORL R8, R8

next1:
	ADDQ $32, DI
	JMP  loop

masks:
	VPAND     errBits<>(SB), Y4, Y3
	VPXOR     Y6, Y6, Y6
	VPCMPEQB  Y6, Y3, Y3
	VPMOVMSKB Y3, CX
	NOTL      CX         // malformed
	VPSLLW    $3, Y5, Y5
	VPMOVMSKB Y5, R12    // bit 0x10: surrogates
	VPCMPEQB  Y6, Y2, Y2
	VPMOVMSKB Y2, DX
	NOTL      DX         // specials

skip:
	// The first R8 bytes end an escape: no specials there.
	MOVL  $-1, AX
	SHLXL R8, AX, AX
	ANDL  AX, DX
	XORL  R8, R8

trouble:
	// CX: malformed, DX: specials, R12: surrogates, of the block at DI.
	TESTL  DX, DX
	JZ     nospecial
	TZCNTL DX, R14  // j, the first special
	TZCNTL CX, R13  // e, the first malformed byte (32 if none)
	CMPL   R13, R14
	JLE    malformed
	MOVL   R12, R13
	BZHIL  R14, R13, R13 // the surrogates before j
	TESTL  R13, R13
	JZ     special
	ORQ    $2, R9

special:
	// Everything before j is read; j is '"', '\\' or a control byte.
	LEAQ    (DI)(R14*1), AX
	CMPB    (SI)(AX*1), $0x5C
	JNE     done
	BTQ     $8, R9
	JCC     done
	LEAQ    1(AX), R13
	CMPQ    R13, BX
	JCC     done
	MOVBLZX (SI)(R13*1), R13
	CMPL    R13, $0x75 // 'u'
	JEQ     uescape
	LEAQ    ·simpleEscape(SB), R14
	CMPB    (R14)(R13*1), $0
	JEQ     done
	ADDQ    $2, AX
	JMP     escape

uescape:
	LEAQ    6(AX), R13
	CMPQ    R13, BX
	JHI     done
	MOVBLZX 2(SI)(AX*1), R13
	LEAL    -48(R13), R14
	CMPL    R14, $10
	JCS     hex2
	ORL     $0x20, R13
	SUBL    $97, R13
	CMPL    R13, $6
	JCC     done

hex2:
	MOVBLZX 3(SI)(AX*1), R13
	LEAL    -48(R13), R14
	CMPL    R14, $10
	JCS     hex3
	ORL     $0x20, R13
	SUBL    $97, R13
	CMPL    R13, $6
	JCC     done

hex3:
	MOVBLZX 4(SI)(AX*1), R13
	LEAL    -48(R13), R14
	CMPL    R14, $10
	JCS     hex4
	ORL     $0x20, R13
	SUBL    $97, R13
	CMPL    R13, $6
	JCC     done

hex4:
	MOVBLZX 5(SI)(AX*1), R13
	LEAL    -48(R13), R14
	CMPL    R14, $10
	JCS     hexok
	ORL     $0x20, R13
	SUBL    $97, R13
	CMPL    R13, $6
	JCC     done

hexok:
	ADDQ $6, AX

escape:
	// AX is just past a valid escape; the specials it covers are its own.
	ORQ   $1, R9
	MOVQ  AX, R13
	SUBQ  DI, R13
	CMPQ  R13, $32
	JCC   cross
	MOVL  $-1, R14
	SHLXL R13, R14, R14
	ANDL  R14, DX
	JMP   trouble

cross:
	// The escape ends in the next block (no special or malformed byte
	// can follow it in this one).
	SUBQ $32, R13
	MOVQ R13, R8
	JMP  next1

nospecial:
	TESTL  CX, CX
	JZ     clean
	TZCNTL CX, R13
	JMP    malformed

clean:
	TESTL R12, R12
	JZ    next
	ORQ   $2, R9
	JMP   next

malformed:
	// R13: e. Back to the start of the character before the first
	// malformed byte, which the caller reads again; the surrogates before
	// e may be before it.
	BZHIL R13, R12, R12
	TESTL R12, R12
	JZ    malformed1
	ORQ   $2, R9

malformed1:
	LEAQ (DI)(R13*1), AX
	JMP  back

tail:
	// Fewer than 32 bytes left. DI starts a character unless the last
	// block validated had a sequence that may go on into them; an escape
	// may end in them.
	MOVQ  DI, AX
	ADDQ  R8, AX
	TESTL R8, R8
	JNZ   done
	TESTL R10, R10
	JZ    done

back:
	// AX is a character boundary if the byte before it is ASCII (or AX is
	// 0); else back to the lead of the character before it.
	TESTQ   AX, AX
	JLE     done
	DECQ    AX
	MOVBLZX (SI)(AX*1), R13
	CMPL    R13, $0x80
	JCC     backloop
	INCQ    AX
	JMP     done

backloop:
	TESTQ   AX, AX
	JLE     done
	MOVBLZX (SI)(AX*1), R13
	ANDL    $0xC0, R13
	CMPL    R13, $0x80
	JNE     done
	DECQ    AX
	JMP     backloop

done:
	ANDQ $3, R9
	MOVQ AX, n+32(FP)
	MOVQ R9, flags+40(FP)
	VZEROUPPER
	RET
