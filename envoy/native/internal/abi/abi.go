package abi

/*
#include "abi.h"

// The callbacks kvgate calls, in the order of abi.h; Missing reports the
// first one the process does not provide.
static const char* kvgate_abi_missing(void) {
#define KVGATE_NEED(f) \
  if (!(f)) return #f;
  KVGATE_NEED(envoy_dynamic_module_callback_log)
  KVGATE_NEED(envoy_dynamic_module_callback_log_enabled)
  KVGATE_NEED(envoy_dynamic_module_callback_http_filter_config_define_counter)
  KVGATE_NEED(envoy_dynamic_module_callback_http_filter_increment_counter)
  KVGATE_NEED(envoy_dynamic_module_callback_http_filter_config_increment_counter)
  KVGATE_NEED(envoy_dynamic_module_callback_http_get_headers_size)
  KVGATE_NEED(envoy_dynamic_module_callback_http_get_headers)
  KVGATE_NEED(envoy_dynamic_module_callback_http_set_header)
  KVGATE_NEED(envoy_dynamic_module_callback_http_send_response)
  KVGATE_NEED(envoy_dynamic_module_callback_http_get_body_size)
  KVGATE_NEED(envoy_dynamic_module_callback_http_get_body_chunks_size)
  KVGATE_NEED(envoy_dynamic_module_callback_http_get_body_chunks)
  KVGATE_NEED(envoy_dynamic_module_callback_http_append_body)
  KVGATE_NEED(envoy_dynamic_module_callback_http_drain_body)
  KVGATE_NEED(envoy_dynamic_module_callback_http_received_buffered_request_body)
  KVGATE_NEED(envoy_dynamic_module_callback_http_set_filter_state_bytes)
  KVGATE_NEED(envoy_dynamic_module_callback_http_filter_get_attribute_string)
  KVGATE_NEED(envoy_dynamic_module_callback_http_filter_get_attribute_bool)
#undef KVGATE_NEED
  return NULL;
}

#include <stdlib.h>

#include "body.h" // kvgate_request_body_size

// kvgate_scratch holds the arrays Envoy writes results into, in C memory:
// a Go array of structs with pointers in them would have cgo's pointer
// check walk every element on every call.
typedef struct kvgate_scratch {
  envoy_dynamic_module_type_envoy_http_header* headers;
  size_t headers_cap;
  envoy_dynamic_module_type_envoy_buffer* bufs;
  size_t bufs_cap;
  envoy_dynamic_module_type_envoy_buffer attr;
  bool flag;
} kvgate_scratch;

// The helpers below make the calls that go together in one crossing from
// Go: each cgo call costs the Go runtime a transition both ways.

// kvgate_request_headers fills s->headers with the request headers and
// returns how many, or -1 when Envoy refuses or memory runs out.
static long kvgate_request_headers(envoy_dynamic_module_type_http_filter_envoy_ptr f, kvgate_scratch* s) {
  const envoy_dynamic_module_type_http_header_type t = envoy_dynamic_module_type_http_header_type_RequestHeader;
  size_t n = envoy_dynamic_module_callback_http_get_headers_size(f, t);
  if (n == 0) return 0;
  if (n > s->headers_cap) {
    void* p = realloc(s->headers, n * sizeof(*s->headers));
    if (p == NULL) return -1;
    s->headers = p;
    s->headers_cap = n;
  }
  if (!envoy_dynamic_module_callback_http_get_headers(f, t, s->headers)) return -1;
  return (long)n;
}

// kvgate_body_chunks fills s->bufs with the slices of a body buffer and
// returns how many (0 when Envoy refuses or memory runs out).
static size_t kvgate_body_chunks(envoy_dynamic_module_type_http_filter_envoy_ptr f,
                                 envoy_dynamic_module_type_http_body_type t, kvgate_scratch* s) {
  size_t n = envoy_dynamic_module_callback_http_get_body_chunks_size(f, t);
  if (n == 0) return 0;
  if (n > s->bufs_cap) {
    void* p = realloc(s->bufs, n * sizeof(*s->bufs));
    if (p == NULL) return 0;
    s->bufs = p;
    s->bufs_cap = n;
  }
  if (!envoy_dynamic_module_callback_http_get_body_chunks(f, t, s->bufs)) return 0;
  return n;
}

static bool kvgate_attribute_string(envoy_dynamic_module_type_http_filter_envoy_ptr f,
                                    envoy_dynamic_module_type_attribute_id a, kvgate_scratch* s) {
  return envoy_dynamic_module_callback_http_filter_get_attribute_string(f, a, &s->attr);
}

static bool kvgate_attribute_bool(envoy_dynamic_module_type_http_filter_envoy_ptr f,
                                  envoy_dynamic_module_type_attribute_id a, kvgate_scratch* s) {
  return envoy_dynamic_module_callback_http_filter_get_attribute_bool(f, a, &s->flag);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Config is Envoy's filter configuration object
// (envoy_dynamic_module_type_http_filter_config_envoy_ptr), valid from
// envoy_dynamic_module_on_http_filter_config_new until the configuration
// is destroyed.
type Config struct{ p unsafe.Pointer }

// ConfigOf returns the Config of the pointer Envoy passed.
func ConfigOf(p unsafe.Pointer) Config { return Config{p} }

// Filter is Envoy's per-stream filter object
// (envoy_dynamic_module_type_http_filter_envoy_ptr), valid during the
// event hook it was passed to.
type Filter struct{ p unsafe.Pointer }

// FilterOf returns the Filter of the pointer Envoy passed.
func FilterOf(p unsafe.Pointer) Filter { return Filter{p} }

// IsNil reports whether f is the zero Filter.
func (f Filter) IsNil() bool { return f.p == nil }

// BodyType selects a request body buffer (envoy_dynamic_module_type_http_body_type).
type BodyType int

// The request body buffers.
const (
	// ReceivedRequestBody is the data of the current body event hook.
	ReceivedRequestBody BodyType = 0
	// BufferedRequestBody is what the filter buffered before it.
	BufferedRequestBody BodyType = 1
)

// Attribute is an Envoy attribute id (envoy_dynamic_module_type_attribute_id).
type Attribute int

// The attributes kvgate reads (trusted senders).
const (
	SourceAddress                   Attribute = 24
	ConnectionMTLS                  Attribute = 29
	ConnectionDNSSANPeerCertificate Attribute = 35
	ConnectionURISANPeerCertificate Attribute = 37
)

// Header is one header, its bytes in Envoy's memory: valid until the end
// of the current event hook or the next call that changes the headers.
type Header struct{ Key, Value []byte }

// Scratch holds the arrays Envoy writes results into, reused from call to
// call so that the hot path does not allocate. One per thread of use; its
// C memory (kvgate_scratch) lives as long as the process.
type Scratch struct {
	c      *C.kvgate_scratch
	labels []C.envoy_dynamic_module_type_module_buffer
}

// mem returns the scratch's C memory, allocating it on first use; nil when
// the allocation fails.
func (s *Scratch) mem() *C.kvgate_scratch {
	if s == nil {
		return nil
	}
	if s.c == nil {
		s.c = (*C.kvgate_scratch)(C.calloc(1, C.size_t(unsafe.Sizeof(C.kvgate_scratch{}))))
	}
	return s.c
}

// probeMissing is set by the kvgate_abiprobe build (probe.go), which
// requires a callback no Envoy has, to test the start-up error.
var probeMissing func() string

// Missing returns the name of the first callback kvgate calls that the
// process does not provide, or "" when Envoy provides them all.
func Missing() string {
	if probeMissing != nil {
		if name := probeMissing(); name != "" {
			return name
		}
	}
	if p := C.kvgate_abi_missing(); p != nil {
		return C.GoString(p)
	}
	return ""
}

func modBuf(b []byte) C.envoy_dynamic_module_type_module_buffer {
	if len(b) == 0 {
		return C.envoy_dynamic_module_type_module_buffer{}
	}
	return C.envoy_dynamic_module_type_module_buffer{ptr: (*C.char)(unsafe.Pointer(&b[0])), length: C.size_t(len(b))}
}

func modStr(s string) C.envoy_dynamic_module_type_module_buffer {
	if len(s) == 0 {
		return C.envoy_dynamic_module_type_module_buffer{}
	}
	return C.envoy_dynamic_module_type_module_buffer{ptr: (*C.char)(unsafe.Pointer(unsafe.StringData(s))), length: C.size_t(len(s))}
}

func envoyBytes(p *C.char, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

// EnvoyBytes returns the bytes of an Envoy buffer passed to an event hook
// (ptr, length), aliasing Envoy's memory.
func EnvoyBytes(ptr unsafe.Pointer, length uintptr) []byte {
	return envoyBytes((*C.char)(ptr), C.size_t(length))
}

// Log writes a message to Envoy's log under the dynamic_modules component;
// level is Envoy's (0 trace … 5 critical).
func Log(level int, msg string) {
	C.envoy_dynamic_module_callback_log(C.envoy_dynamic_module_type_log_level(level), modStr(msg))
	runtime.KeepAlive(msg)
}

// LogEnabled reports whether Envoy logs messages of level.
func LogEnabled(level int) bool {
	return bool(C.envoy_dynamic_module_callback_log_enabled(C.envoy_dynamic_module_type_log_level(level)))
}

// MetricsResult is a metrics callback's result; 0 is success.
type MetricsResult int

// DefineCounter defines a counter family with label names on a filter
// configuration and returns its id. Only during
// envoy_dynamic_module_on_http_filter_config_new.
func DefineCounter(c Config, s *Scratch, name string, labels []string) (uint, MetricsResult) {
	var pin runtime.Pinner
	defer pin.Unpin()
	s.labels = s.labels[:0]
	for _, l := range labels {
		pin.Pin(unsafe.StringData(l))
		s.labels = append(s.labels, modStr(l))
	}
	var lp *C.envoy_dynamic_module_type_module_buffer
	if len(s.labels) > 0 {
		lp = &s.labels[0]
	}
	var id C.size_t
	r := C.envoy_dynamic_module_callback_http_filter_config_define_counter(C.envoy_dynamic_module_type_http_filter_config_envoy_ptr(c.p),
		modStr(name), lp, C.size_t(len(s.labels)), &id)
	runtime.KeepAlive(name)
	return uint(id), MetricsResult(r)
}

// Series is one series of a counter family: its id and label values,
// held in C memory for the life of the process so that an increment passes
// them without pinning anything.
type Series struct {
	id     C.size_t
	values *C.envoy_dynamic_module_type_module_buffer
	n      C.size_t
}

// NewSeries returns the series of counter id with the given label values
// (as many as the family has label names).
func NewSeries(id uint, values []string) Series {
	s := Series{id: C.size_t(id), n: C.size_t(len(values))}
	if len(values) == 0 {
		return s
	}
	arr := (*[1 << 16]C.envoy_dynamic_module_type_module_buffer)(C.malloc(C.size_t(len(values)) * C.size_t(unsafe.Sizeof(C.envoy_dynamic_module_type_module_buffer{}))))
	for i, v := range values {
		arr[i] = C.envoy_dynamic_module_type_module_buffer{ptr: C.CString(v), length: C.size_t(len(v))}
	}
	s.values = &arr[0]
	return s
}

// ID is the series' counter family id.
func (s Series) ID() uint { return uint(s.id) }

// Values are the series' label values.
func (s Series) Values() []string {
	if s.n == 0 {
		return nil
	}
	vs := unsafe.Slice(s.values, int(s.n))
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = C.GoStringN(v.ptr, C.int(v.length))
	}
	return out
}

// IncrementOnConfig adds v to a series outside a stream (v = 0 makes the
// series exist from start-up).
func IncrementOnConfig(c Config, s Series, v uint64) MetricsResult {
	return MetricsResult(C.envoy_dynamic_module_callback_http_filter_config_increment_counter(
		C.envoy_dynamic_module_type_http_filter_config_envoy_ptr(c.p), s.id, s.values, s.n, C.uint64_t(v)))
}

// Increment adds v to a series.
func (f Filter) Increment(s Series, v uint64) MetricsResult {
	return MetricsResult(C.envoy_dynamic_module_callback_http_filter_increment_counter(f.ptr(), s.id, s.values, s.n, C.uint64_t(v)))
}

func (f Filter) ptr() C.envoy_dynamic_module_type_http_filter_envoy_ptr {
	return C.envoy_dynamic_module_type_http_filter_envoy_ptr(f.p)
}

// RequestHeaders appends the request headers to dst[:0] and returns it;
// ok is false when Envoy has none to give.
func (f Filter) RequestHeaders(s *Scratch, dst []Header) ([]Header, bool) {
	dst = dst[:0]
	m := s.mem()
	if m == nil {
		return dst, false
	}
	n := int(C.kvgate_request_headers(f.ptr(), m))
	if n <= 0 {
		return dst, n == 0
	}
	for _, h := range unsafe.Slice(m.headers, n) {
		dst = append(dst, Header{envoyBytes(h.key_ptr, h.key_length), envoyBytes(h.value_ptr, h.value_length)})
	}
	return dst, true
}

// RemoveRequestHeader removes every value of a request header.
func (f Filter) RemoveRequestHeader(key string) bool {
	ok := C.envoy_dynamic_module_callback_http_set_header(f.ptr(), C.envoy_dynamic_module_type_http_header_type_RequestHeader,
		modStr(key), C.envoy_dynamic_module_type_module_buffer{})
	runtime.KeepAlive(key)
	return bool(ok)
}

// SetRequestHeader sets a request header to value, replacing every value
// it had.
func (f Filter) SetRequestHeader(key string, value []byte) bool {
	ok := C.envoy_dynamic_module_callback_http_set_header(f.ptr(), C.envoy_dynamic_module_type_http_header_type_RequestHeader,
		modStr(key), modBuf(value))
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
	return bool(ok)
}

// SendResponse answers the stream locally with status, headers, body and
// response code details.
func (f Filter) SendResponse(status int, headers [][2]string, body []byte, details string) {
	var pin runtime.Pinner
	defer pin.Unpin()
	hs := make([]C.envoy_dynamic_module_type_module_http_header, len(headers))
	for i, h := range headers {
		pin.Pin(unsafe.StringData(h[0]))
		pin.Pin(unsafe.StringData(h[1]))
		k, v := modStr(h[0]), modStr(h[1])
		hs[i] = C.envoy_dynamic_module_type_module_http_header{key_ptr: k.ptr, key_length: k.length, value_ptr: v.ptr, value_length: v.length}
	}
	var hp *C.envoy_dynamic_module_type_module_http_header
	if len(hs) > 0 {
		hp = &hs[0]
	}
	C.envoy_dynamic_module_callback_http_send_response(f.ptr(), C.uint32_t(status), hp, C.size_t(len(hs)), modBuf(body), modStr(details))
	runtime.KeepAlive(body)
	runtime.KeepAlive(details)
}

// BodySize returns the size of a request body buffer.
func (f Filter) BodySize(t BodyType) int {
	return int(C.envoy_dynamic_module_callback_http_get_body_size(f.ptr(), C.envoy_dynamic_module_type_http_body_type(t)))
}

// RequestBodySize returns the size of the whole request body received so
// far: the buffered body and, in a body hook (inBody), the hook's data
// unless that is the buffered body itself.
func (f Filter) RequestBodySize(inBody bool) int {
	return int(C.kvgate_request_body_size(f.ptr(), C.bool(inBody)))
}

// BodyChunks appends the slices of a request body buffer to dst and
// returns it, aliasing Envoy's memory (valid until the end of the event
// hook or the next call that changes the body), which the module may
// write in place.
func (f Filter) BodyChunks(s *Scratch, t BodyType, dst [][]byte) [][]byte {
	m := s.mem()
	if m == nil {
		return dst
	}
	n := int(C.kvgate_body_chunks(f.ptr(), C.envoy_dynamic_module_type_http_body_type(t), m))
	if n == 0 {
		return dst
	}
	for _, c := range unsafe.Slice(m.bufs, n) {
		if b := envoyBytes(c.ptr, c.length); len(b) > 0 {
			dst = append(dst, b)
		}
	}
	return dst
}

// AppendBody appends b to a request body buffer.
func (f Filter) AppendBody(t BodyType, b []byte) bool {
	ok := C.envoy_dynamic_module_callback_http_append_body(f.ptr(), C.envoy_dynamic_module_type_http_body_type(t), modBuf(b))
	runtime.KeepAlive(b)
	return bool(ok)
}

// DrainBody removes the first n bytes of a request body buffer.
func (f Filter) DrainBody(t BodyType, n int) bool {
	return bool(C.envoy_dynamic_module_callback_http_drain_body(f.ptr(), C.envoy_dynamic_module_type_http_body_type(t), C.size_t(n)))
}

// ReceivedBufferedRequestBody reports whether the body of the current body
// event is the buffered body itself (an earlier filter buffered it).
func (f Filter) ReceivedBufferedRequestBody() bool {
	return bool(C.envoy_dynamic_module_callback_http_received_buffered_request_body(f.ptr()))
}

// SetFilterState sets the filter state object key to a string value, which
// an access log prints with %FILTER_STATE(key:PLAIN)%.
func (f Filter) SetFilterState(key, value string) bool {
	ok := C.envoy_dynamic_module_callback_http_set_filter_state_bytes(f.ptr(), modStr(key), modStr(value))
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
	return bool(ok)
}

// AttributeString returns a string attribute, aliasing Envoy's memory;
// ok is false when the stream has none.
func (f Filter) AttributeString(s *Scratch, a Attribute) ([]byte, bool) {
	m := s.mem()
	if m == nil || !C.kvgate_attribute_string(f.ptr(), C.envoy_dynamic_module_type_attribute_id(a), m) {
		return nil, false
	}
	return envoyBytes(m.attr.ptr, m.attr.length), true
}

// AttributeBool returns a boolean attribute; ok is false when the stream
// has none.
func (f Filter) AttributeBool(s *Scratch, a Attribute) (v, ok bool) {
	m := s.mem()
	if m == nil || !C.kvgate_attribute_bool(f.ptr(), C.envoy_dynamic_module_type_attribute_id(a), m) {
		return false, false
	}
	return bool(m.flag), true
}
