package filterspec

import "github.com/kvgate/kvgate/internal/httperr"

// Local replies.
const (
	// DetailsRejected is the response code details of a rejected body.
	DetailsRejected = "kvgate_body_rejected"
	// DetailsFailed is the response code details of a filter failure.
	DetailsFailed = "kvgate_filter_failed"
	// DetailsGRPCRefused is the response code details of a refused gRPC
	// request.
	DetailsGRPCRefused = "kvgate_grpc_refused"
	// DetailsRouterOnlyRefused is the response code details of an
	// untrusted request refused for a router-only field.
	DetailsRouterOnlyRefused = "kvgate_router_only_refused"
)

// FailureBody is the 503 answer when the filter cannot do its job.
var FailureBody = httperr.Body(503, httperr.TypeServer, FailureMessage)

// FailureMessage is what FailureBody (and a gRPC failure's grpc-message) says.
const FailureMessage = "the request could not be filtered"

// GRPCRefusedMessage is the grpc-message of a gRPC request refused under
// "grpc": "refuse" (grpc-status httperr.GRPCStatusPermissionDenied).
const GRPCRefusedMessage = "kvgate: gRPC requests are refused here (plugin configuration \"grpc\": \"refuse\")"
