package proxywasm

// Status is a host function's result (proxy_status_t, called WasmResult in
// Envoy).
type Status uint32

// The statuses of ABI 0.2.1.
const (
	StatusOK                   Status = 0
	StatusNotFound             Status = 1
	StatusBadArgument          Status = 2
	StatusSerializationFailure Status = 3
	StatusParseFailure         Status = 4
	StatusBadExpression        Status = 5
	StatusInvalidMemoryAccess  Status = 6
	StatusEmpty                Status = 7
	StatusCASMismatch          Status = 8
	StatusResultMismatch       Status = 9
	StatusInternalFailure      Status = 10
	StatusBrokenConnection     Status = 11
	StatusUnimplemented        Status = 12
)

// BufferType selects a buffer in proxy_get_buffer_status,
// proxy_get_buffer_bytes and proxy_set_buffer_bytes (proxy_buffer_type_t).
type BufferType uint32

// The buffer types of ABI 0.2.1.
const (
	BufferHTTPRequestBody      BufferType = 0
	BufferHTTPResponseBody     BufferType = 1
	BufferDownstreamData       BufferType = 2
	BufferUpstreamData         BufferType = 3
	BufferHTTPCallResponseBody BufferType = 4
	BufferGRPCReceive          BufferType = 5
	BufferVMConfiguration      BufferType = 6
	BufferPluginConfiguration  BufferType = 7
	BufferCallData             BufferType = 8

	// BufferTypeMax is the largest buffer type a host recognises; a larger
	// one is a bad argument, a known one not available now is not found.
	BufferTypeMax = BufferCallData
)

// MapType selects a header map in the proxy_*_header_map_* functions
// (proxy_map_type_t).
type MapType uint32

// The map types of ABI 0.2.1.
const (
	MapHTTPRequestHeaders          MapType = 0
	MapHTTPRequestTrailers         MapType = 1
	MapHTTPResponseHeaders         MapType = 2
	MapHTTPResponseTrailers        MapType = 3
	MapGRPCReceiveInitialMetadata  MapType = 4
	MapGRPCReceiveTrailingMetadata MapType = 5
	MapHTTPCallResponseHeaders     MapType = 6
	MapHTTPCallResponseTrailers    MapType = 7

	// MapTypeMax is the largest map type a host recognises.
	MapTypeMax = MapHTTPCallResponseTrailers
)

// LogLevel is the level of proxy_log and proxy_get_log_level
// (proxy_log_level_t).
type LogLevel uint32

// The log levels of ABI 0.2.1.
const (
	LogTrace    LogLevel = 0
	LogDebug    LogLevel = 1
	LogInfo     LogLevel = 2
	LogWarn     LogLevel = 3
	LogError    LogLevel = 4
	LogCritical LogLevel = 5
)

// MetricType is the kind of metric proxy_define_metric defines
// (proxy_metric_type_t).
type MetricType uint32

// The metric types of ABI 0.2.1.
const (
	MetricCounter   MetricType = 0
	MetricGauge     MetricType = 1
	MetricHistogram MetricType = 2
)

// StreamType selects the stream of proxy_continue_stream and
// proxy_close_stream (proxy_stream_type_t).
type StreamType uint32

// The stream types of ABI 0.2.1.
const (
	StreamHTTPRequest  StreamType = 0
	StreamHTTPResponse StreamType = 1
	StreamDownstream   StreamType = 2
	StreamUpstream     StreamType = 3
)

// Action is what an HTTP stream callback (proxy_on_request_headers, _body,
// _trailers and their response twins) returns.
type Action uint32

// The actions kvgate uses.
const (
	// ActionContinue lets the stream go on to the next filter.
	ActionContinue Action = 0
	// ActionPause stops iteration: StopIteration for headers and trailers,
	// StopIterationAndBuffer for body data. The host resumes the stream
	// when the guest calls proxy_continue_stream or sends a local reply.
	ActionPause Action = 1
)

// GRPCStatusNone is the grpc_status argument of proxy_send_local_response
// for a reply that is not a gRPC one.
const GRPCStatusNone int32 = -1
