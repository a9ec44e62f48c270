// The subset of Envoy's dynamic-module ABI (source/extensions/dynamic_modules/
// abi/abi.h in Envoy's source) that kvgate's native module uses: the types,
// the HTTP filter event hooks the module exports and the callbacks it calls,
// with the signatures of Envoy 1.40.0 (ABI "v0.2.0"). doc.go says what each
// is used for and how the subset was checked against the Envoy binary.
//
// Every callback is declared weak: the module links without Envoy (its unit
// tests run in an ordinary executable, where each resolves to NULL), and
// when Envoy loads it the dynamic linker binds each one to Envoy's exported
// symbol. abi.Missing names the first callback Envoy did not provide, so
// that envoy_dynamic_module_on_program_init refuses to load against an
// Envoy that lacks one instead of crashing on the first request.
//
// Declarations only: the module's main package includes this header in a
// cgo preamble next to //export functions.

#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------- types

typedef const char* envoy_dynamic_module_type_abi_version_module_ptr;
typedef const char* envoy_dynamic_module_type_buffer_module_ptr;
typedef const char* envoy_dynamic_module_type_buffer_envoy_ptr;

typedef struct envoy_dynamic_module_type_envoy_buffer {
  envoy_dynamic_module_type_buffer_envoy_ptr ptr;
  size_t length;
} envoy_dynamic_module_type_envoy_buffer;

typedef struct envoy_dynamic_module_type_module_buffer {
  envoy_dynamic_module_type_buffer_module_ptr ptr;
  size_t length;
} envoy_dynamic_module_type_module_buffer;

typedef struct envoy_dynamic_module_type_module_http_header {
  envoy_dynamic_module_type_buffer_module_ptr key_ptr;
  size_t key_length;
  envoy_dynamic_module_type_buffer_module_ptr value_ptr;
  size_t value_length;
} envoy_dynamic_module_type_module_http_header;

typedef struct envoy_dynamic_module_type_envoy_http_header {
  envoy_dynamic_module_type_buffer_envoy_ptr key_ptr;
  size_t key_length;
  envoy_dynamic_module_type_buffer_envoy_ptr value_ptr;
  size_t value_length;
} envoy_dynamic_module_type_envoy_http_header;

typedef enum envoy_dynamic_module_type_http_header_type {
  envoy_dynamic_module_type_http_header_type_RequestHeader = 0,
  envoy_dynamic_module_type_http_header_type_RequestTrailer = 1,
  envoy_dynamic_module_type_http_header_type_ResponseHeader = 2,
  envoy_dynamic_module_type_http_header_type_ResponseTrailer = 3,
} envoy_dynamic_module_type_http_header_type;

typedef enum envoy_dynamic_module_type_log_level {
  envoy_dynamic_module_type_log_level_Trace = 0,
  envoy_dynamic_module_type_log_level_Debug = 1,
  envoy_dynamic_module_type_log_level_Info = 2,
  envoy_dynamic_module_type_log_level_Warn = 3,
  envoy_dynamic_module_type_log_level_Error = 4,
  envoy_dynamic_module_type_log_level_Critical = 5,
  envoy_dynamic_module_type_log_level_Off = 6,
} envoy_dynamic_module_type_log_level;

typedef enum envoy_dynamic_module_type_metrics_result {
  envoy_dynamic_module_type_metrics_result_Success = 0,
  envoy_dynamic_module_type_metrics_result_MetricNotFound = 1,
  envoy_dynamic_module_type_metrics_result_InvalidLabels = 2,
  envoy_dynamic_module_type_metrics_result_Frozen = 3,
} envoy_dynamic_module_type_metrics_result;

// Only the attributes kvgate reads, at their positions in Envoy's enum.
typedef enum envoy_dynamic_module_type_attribute_id {
  envoy_dynamic_module_type_attribute_id_SourceAddress = 24,
  envoy_dynamic_module_type_attribute_id_ConnectionMtls = 29,
  envoy_dynamic_module_type_attribute_id_ConnectionDnsSanPeerCertificate = 35,
  envoy_dynamic_module_type_attribute_id_ConnectionUriSanPeerCertificate = 37,
} envoy_dynamic_module_type_attribute_id;

typedef enum envoy_dynamic_module_type_http_callout_result {
  envoy_dynamic_module_type_http_callout_result_Success = 0,
} envoy_dynamic_module_type_http_callout_result;

typedef enum envoy_dynamic_module_type_http_stream_reset_reason {
  envoy_dynamic_module_type_http_stream_reset_reason_ConnectionFailure = 0,
} envoy_dynamic_module_type_http_stream_reset_reason;

typedef enum envoy_dynamic_module_type_on_http_filter_local_reply_status {
  envoy_dynamic_module_type_on_http_filter_local_reply_status_Continue = 0,
} envoy_dynamic_module_type_on_http_filter_local_reply_status;

typedef void* envoy_dynamic_module_type_http_filter_config_envoy_ptr;
typedef const void* envoy_dynamic_module_type_http_filter_config_module_ptr;
typedef const void* envoy_dynamic_module_type_http_filter_per_route_config_module_ptr;
typedef void* envoy_dynamic_module_type_http_filter_envoy_ptr;
typedef const void* envoy_dynamic_module_type_http_filter_module_ptr;

typedef enum envoy_dynamic_module_type_http_body_type {
  envoy_dynamic_module_type_http_body_type_ReceivedRequestBody = 0,
  envoy_dynamic_module_type_http_body_type_BufferedRequestBody = 1,
  envoy_dynamic_module_type_http_body_type_ReceivedResponseBody = 2,
  envoy_dynamic_module_type_http_body_type_BufferedResponseBody = 3,
} envoy_dynamic_module_type_http_body_type;

typedef enum envoy_dynamic_module_type_on_http_filter_request_headers_status {
  envoy_dynamic_module_type_on_http_filter_request_headers_status_Continue = 0,
  envoy_dynamic_module_type_on_http_filter_request_headers_status_StopIteration = 1,
} envoy_dynamic_module_type_on_http_filter_request_headers_status;

typedef enum envoy_dynamic_module_type_on_http_filter_request_body_status {
  envoy_dynamic_module_type_on_http_filter_request_body_status_Continue = 0,
  envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationAndBuffer = 1,
  envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationNoBuffer = 3,
} envoy_dynamic_module_type_on_http_filter_request_body_status;

typedef enum envoy_dynamic_module_type_on_http_filter_request_trailers_status {
  envoy_dynamic_module_type_on_http_filter_request_trailers_status_Continue = 0,
  envoy_dynamic_module_type_on_http_filter_request_trailers_status_StopIteration = 1,
} envoy_dynamic_module_type_on_http_filter_request_trailers_status;

typedef enum envoy_dynamic_module_type_on_http_filter_response_headers_status {
  envoy_dynamic_module_type_on_http_filter_response_headers_status_Continue = 0,
} envoy_dynamic_module_type_on_http_filter_response_headers_status;

typedef enum envoy_dynamic_module_type_on_http_filter_response_body_status {
  envoy_dynamic_module_type_on_http_filter_response_body_status_Continue = 0,
} envoy_dynamic_module_type_on_http_filter_response_body_status;

typedef enum envoy_dynamic_module_type_on_http_filter_response_trailers_status {
  envoy_dynamic_module_type_on_http_filter_response_trailers_status_Continue = 0,
} envoy_dynamic_module_type_on_http_filter_response_trailers_status;

// ---------------------------------------------------------------- event hooks (exported by the module)

envoy_dynamic_module_type_abi_version_module_ptr envoy_dynamic_module_on_program_init(void);

envoy_dynamic_module_type_http_filter_config_module_ptr envoy_dynamic_module_on_http_filter_config_new(
    envoy_dynamic_module_type_http_filter_config_envoy_ptr filter_config_envoy_ptr,
    envoy_dynamic_module_type_envoy_buffer name, envoy_dynamic_module_type_envoy_buffer config);

void envoy_dynamic_module_on_http_filter_config_destroy(
    envoy_dynamic_module_type_http_filter_config_module_ptr filter_config_ptr);

envoy_dynamic_module_type_http_filter_per_route_config_module_ptr
envoy_dynamic_module_on_http_filter_per_route_config_new(envoy_dynamic_module_type_envoy_buffer name,
                                                         envoy_dynamic_module_type_envoy_buffer config);

void envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    envoy_dynamic_module_type_http_filter_per_route_config_module_ptr filter_config_ptr);

envoy_dynamic_module_type_http_filter_module_ptr envoy_dynamic_module_on_http_filter_new(
    envoy_dynamic_module_type_http_filter_config_module_ptr filter_config_ptr,
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr);

envoy_dynamic_module_type_on_http_filter_request_headers_status envoy_dynamic_module_on_http_filter_request_headers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream);

envoy_dynamic_module_type_on_http_filter_request_body_status envoy_dynamic_module_on_http_filter_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream);

envoy_dynamic_module_type_on_http_filter_request_trailers_status envoy_dynamic_module_on_http_filter_request_trailers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr);

envoy_dynamic_module_type_on_http_filter_response_headers_status envoy_dynamic_module_on_http_filter_response_headers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream);

envoy_dynamic_module_type_on_http_filter_response_body_status envoy_dynamic_module_on_http_filter_response_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream);

envoy_dynamic_module_type_on_http_filter_response_trailers_status envoy_dynamic_module_on_http_filter_response_trailers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr);

void envoy_dynamic_module_on_http_filter_stream_complete(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr);

void envoy_dynamic_module_on_http_filter_destroy(envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr);

// ---------------------------------------------------------------- callbacks (provided by Envoy)

#define KVGATE_WEAK __attribute__((weak))

KVGATE_WEAK void envoy_dynamic_module_callback_log(envoy_dynamic_module_type_log_level level,
                                                   envoy_dynamic_module_type_module_buffer message);

KVGATE_WEAK bool envoy_dynamic_module_callback_log_enabled(envoy_dynamic_module_type_log_level level);

KVGATE_WEAK envoy_dynamic_module_type_metrics_result envoy_dynamic_module_callback_http_filter_config_define_counter(
    envoy_dynamic_module_type_http_filter_config_envoy_ptr filter_config_envoy_ptr,
    envoy_dynamic_module_type_module_buffer name, envoy_dynamic_module_type_module_buffer* label_names,
    size_t label_names_length, size_t* counter_id_ptr);

KVGATE_WEAK envoy_dynamic_module_type_metrics_result envoy_dynamic_module_callback_http_filter_increment_counter(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr, size_t id,
    envoy_dynamic_module_type_module_buffer* label_values, size_t label_values_length, uint64_t value);

KVGATE_WEAK envoy_dynamic_module_type_metrics_result envoy_dynamic_module_callback_http_filter_config_increment_counter(
    envoy_dynamic_module_type_http_filter_config_envoy_ptr filter_config_envoy_ptr, size_t id,
    envoy_dynamic_module_type_module_buffer* label_values, size_t label_values_length, uint64_t value);

KVGATE_WEAK size_t envoy_dynamic_module_callback_http_get_headers_size(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_header_type header_type);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_get_headers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_header_type header_type,
    envoy_dynamic_module_type_envoy_http_header* result_headers);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_set_header(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_header_type header_type, envoy_dynamic_module_type_module_buffer key,
    envoy_dynamic_module_type_module_buffer value);

KVGATE_WEAK void envoy_dynamic_module_callback_http_send_response(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr, uint32_t status_code,
    envoy_dynamic_module_type_module_http_header* headers_vector, size_t headers_vector_size,
    envoy_dynamic_module_type_module_buffer body, envoy_dynamic_module_type_module_buffer details);

KVGATE_WEAK size_t envoy_dynamic_module_callback_http_get_body_size(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_body_type body_type);

KVGATE_WEAK size_t envoy_dynamic_module_callback_http_get_body_chunks_size(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_body_type body_type);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_get_body_chunks(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_body_type body_type,
    envoy_dynamic_module_type_envoy_buffer* result_buffer_vector);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_append_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_body_type body_type, envoy_dynamic_module_type_module_buffer data);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_drain_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_body_type body_type, size_t number_of_bytes);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_received_buffered_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_set_filter_state_bytes(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr, envoy_dynamic_module_type_module_buffer key,
    envoy_dynamic_module_type_module_buffer value);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_filter_get_attribute_string(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_attribute_id attribute_id, envoy_dynamic_module_type_envoy_buffer* result);

KVGATE_WEAK bool envoy_dynamic_module_callback_http_filter_get_attribute_bool(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_attribute_id attribute_id, bool* result);
