package native

import "github.com/kvgate/kvgate/envoy/native/internal/abi"

// Stream is what the module calls on one Envoy stream during an event
// hook: the dynamic-module callbacks of internal/abi, behind an interface
// so that the tests and the fuzz target drive the module with a fake
// Envoy. Byte slices returned alias the host's memory and are valid until
// the end of the hook or the next call that changes what they show.
type Stream interface {
	RequestHeaders(dst []abi.Header) ([]abi.Header, bool)
	RemoveRequestHeader(key string) bool
	SetRequestHeader(key string, value []byte) bool
	SendResponse(status int, headers [][2]string, body []byte, details string)
	BodySize(t abi.BodyType) int
	// RequestBodySize is the whole body received so far: the buffered
	// body and, in a body hook (inBody), the hook's data unless
	// ReceivedBufferedRequestBody (one call where BodySize takes three).
	RequestBodySize(inBody bool) int
	BodyChunks(t abi.BodyType, dst [][]byte) [][]byte
	AppendBody(t abi.BodyType, b []byte) bool
	DrainBody(t abi.BodyType, n int) bool
	ReceivedBufferedRequestBody() bool
	SetFilterState(key, value string) bool
	AttributeString(a abi.Attribute) ([]byte, bool)
	AttributeBool(a abi.Attribute) (v, ok bool)
	Increment(s abi.Series, v uint64)
}

// Env is what the module needs from the process: the log and, during a
// configuration's creation, its counters. The real one is Envoy's.
type Env interface {
	Log(level int, msg string)
	// DefineCounter defines a counter family with label names on the
	// configuration being created and returns its id.
	DefineCounter(name string, labels []string) (uint, error)
	// NewSeries returns one series of a family (its label values).
	NewSeries(id uint, values []string) abi.Series
	// Touch adds 0 to a series outside any stream, so that it exists from
	// start-up.
	Touch(s abi.Series) error
}

// envoyStream is Stream on a real Envoy filter.
type envoyStream struct {
	f abi.Filter
	s *abi.Scratch
}

func (e *envoyStream) RequestHeaders(dst []abi.Header) ([]abi.Header, bool) {
	return e.f.RequestHeaders(e.s, dst)
}
func (e *envoyStream) RemoveRequestHeader(key string) bool { return e.f.RemoveRequestHeader(key) }
func (e *envoyStream) SetRequestHeader(key string, value []byte) bool {
	return e.f.SetRequestHeader(key, value)
}
func (e *envoyStream) SendResponse(status int, headers [][2]string, body []byte, details string) {
	e.f.SendResponse(status, headers, body, details)
}
func (e *envoyStream) BodySize(t abi.BodyType) int { return e.f.BodySize(t) }
func (e *envoyStream) RequestBodySize(inBody bool) int {
	return e.f.RequestBodySize(inBody)
}
func (e *envoyStream) BodyChunks(t abi.BodyType, dst [][]byte) [][]byte {
	return e.f.BodyChunks(e.s, t, dst)
}
func (e *envoyStream) AppendBody(t abi.BodyType, b []byte) bool { return e.f.AppendBody(t, b) }
func (e *envoyStream) DrainBody(t abi.BodyType, n int) bool     { return e.f.DrainBody(t, n) }
func (e *envoyStream) ReceivedBufferedRequestBody() bool        { return e.f.ReceivedBufferedRequestBody() }
func (e *envoyStream) SetFilterState(key, value string) bool    { return e.f.SetFilterState(key, value) }
func (e *envoyStream) AttributeString(a abi.Attribute) ([]byte, bool) {
	return e.f.AttributeString(e.s, a)
}
func (e *envoyStream) AttributeBool(a abi.Attribute) (bool, bool) { return e.f.AttributeBool(e.s, a) }
func (e *envoyStream) Increment(s abi.Series, v uint64)           { e.f.Increment(s, v) }

// EnvoyEnv is Env on Envoy, for the configuration cfg.
type EnvoyEnv struct {
	Config abi.Config
	s      abi.Scratch
}

// Log writes to Envoy's log.
func (e *EnvoyEnv) Log(level int, msg string) { abi.Log(level, msg) }

// DefineCounter defines a counter family on e.Config.
func (e *EnvoyEnv) DefineCounter(name string, labels []string) (uint, error) {
	id, r := abi.DefineCounter(e.Config, &e.s, name, labels)
	if r != 0 {
		return 0, metricsError(r)
	}
	return id, nil
}

// NewSeries returns a series of family id.
func (e *EnvoyEnv) NewSeries(id uint, values []string) abi.Series { return abi.NewSeries(id, values) }

// Touch makes a series exist at 0.
func (e *EnvoyEnv) Touch(s abi.Series) error {
	if r := abi.IncrementOnConfig(e.Config, s, 0); r != 0 {
		return metricsError(r)
	}
	return nil
}

type metricsError abi.MetricsResult

func (e metricsError) Error() string {
	switch e {
	case 1:
		return "metric not found"
	case 2:
		return "invalid labels"
	case 3:
		return "stats creation is frozen"
	}
	return "metrics callback failed"
}
