package kvhints

// plainWords returns the length of the longest prefix of b made of whole
// 16-byte blocks none of whose bytes ends a string's fast path (see
// stringSpecial). It stops before the first block holding such a byte, or
// when fewer than 16 bytes remain; the caller goes on word by word.
//
// On wasm it is written in assembly (plain_wasm.s), because Go's wasm code
// sends every loop iteration through the function's jump table, which costs
// more than the scan itself; elsewhere it is plainWordsGo. Both are checked
// against each other by TestPlainWords.
func plainWordsGo(b []byte) int {
	i := 0
	for i+16 <= len(b) && stringSpecial(le64(b[i:]))|stringSpecial(le64(b[i+8:])) == 0 {
		i += 16
	}
	return i
}
