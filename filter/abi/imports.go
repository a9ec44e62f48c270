//go:build wasip1

package abi

// The host functions, with the proxy-wasm ABI 0.2.1 signatures documented
// in doc.go. Addresses are passed as uint32 linear-memory offsets.

//go:wasmimport env proxy_log
func proxyLog(level, messageData, messageSize uint32) uint32

//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(bufferType, start, maxSize, returnBufferData, returnBufferSize uint32) uint32

//go:wasmimport env proxy_set_buffer_bytes
func proxySetBufferBytes(bufferType, start, size, bufferData, bufferSize uint32) uint32

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(mapType, returnMapData, returnMapSize uint32) uint32

//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(mapType, keyData, keySize uint32) uint32

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(statusCode, detailsData, detailsSize, bodyData, bodySize, headersData, headersSize uint32, grpcStatus int32) uint32

//go:wasmimport env proxy_define_metric
func proxyDefineMetric(metricType, nameData, nameSize, returnMetricID uint32) uint32

//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(metricID uint32, offset int64) uint32

//go:wasmimport env proxy_get_property
func proxyGetProperty(pathData, pathSize, returnValueData, returnValueSize uint32) uint32
