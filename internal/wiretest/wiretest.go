// Package wiretest builds request bodies the way clients put them on the
// wire, for the tests of every layer that reads them (the rulebook, the
// filter, the hosts end to end): gRPC messages, and JSON text in UTF-16 and
// UTF-32, which Python's json.loads reads.
package wiretest

import "encoding/binary"

// GRPCFrame is one gRPC message: flag (1 for compressed), its big-endian
// length, the message.
func GRPCFrame(flag byte, msg []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// UTF32BE encodes s in UTF-32, big-endian, without a byte-order mark.
func UTF32BE(s string) []byte {
	var b []byte
	for _, r := range s {
		b = binary.BigEndian.AppendUint32(b, uint32(r))
	}
	return b
}

// UTF16BE encodes ASCII text s in UTF-16, big-endian, without a byte-order
// mark (each rune as one unit: the tests' JSON is ASCII).
func UTF16BE(s string) []byte {
	var b []byte
	for _, r := range s {
		b = binary.BigEndian.AppendUint16(b, uint16(r))
	}
	return b
}
