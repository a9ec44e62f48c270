//go:build wasip1

package abi

import "github.com/kvgate/kvgate/proxywasm"

// The host functions, with the proxy-wasm ABI 0.2.1 signatures documented
// in package proxywasm. Addresses are passed as uint32 linear-memory
// offsets; the proxywasm types are uint32s too.

//go:wasmimport env proxy_log
func proxyLog(level proxywasm.LogLevel, messageData, messageSize uint32) proxywasm.Status

//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(bufferType proxywasm.BufferType, start, maxSize, returnBufferData, returnBufferSize uint32) proxywasm.Status

//go:wasmimport env proxy_set_buffer_bytes
func proxySetBufferBytes(bufferType proxywasm.BufferType, start, size, bufferData, bufferSize uint32) proxywasm.Status

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(mapType proxywasm.MapType, returnMapData, returnMapSize uint32) proxywasm.Status

//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(mapType proxywasm.MapType, keyData, keySize uint32) proxywasm.Status

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(statusCode, detailsData, detailsSize, bodyData, bodySize, headersData, headersSize uint32, grpcStatus int32) proxywasm.Status

//go:wasmimport env proxy_define_metric
func proxyDefineMetric(metricType proxywasm.MetricType, nameData, nameSize, returnMetricID uint32) proxywasm.Status

//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(metricID uint32, offset int64) proxywasm.Status

//go:wasmimport env proxy_get_property
func proxyGetProperty(pathData, pathSize, returnValueData, returnValueSize uint32) proxywasm.Status
