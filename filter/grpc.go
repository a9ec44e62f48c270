package filter

import (
	"strconv"

	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/proxywasm"
)

// gRPC requests (docs/spec.md, Reading a body the way the worker does):
// which requests are labelled gRPC and whether a body so labelled passes
// uninspected is kvhints' (IsGRPCContentType, DecideGRPC); the shapes of
// the answers are httperr's. The filter decides and answers.

// grpcReplyHeaders are the headers of a gRPC answer ("trailers-only").
func grpcReplyHeaders(code int, msg string) []byte {
	return proxywasm.EncodeHeaderMap([][2]string{
		{"content-type", "application/grpc"},
		{"grpc-status", strconv.Itoa(code)},
		{"grpc-message", httperr.GRPCMessage(msg)},
	})
}
