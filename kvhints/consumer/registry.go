package consumer

// Registry is the server-controlled list of endpoints a hint may direct a
// fetch to. Implementations must answer from server state only; an
// endpoint's presence in a hint never adds it.
type Registry interface {
	// Allows reports whether the endpoint, compared exactly, is listed.
	Allows(endpoint string) bool
}

// EndpointSet is a fixed Registry of exact endpoint strings. No
// normalization is applied: "tcp://10.0.0.1:23280" and
// "tcp://10.0.0.1:023280" are different entries. The nil *EndpointSet
// allows nothing.
type EndpointSet struct {
	m map[string]struct{}
}

// NewEndpointSet builds a registry from endpoints, copying them.
func NewEndpointSet(endpoints ...string) *EndpointSet {
	s := &EndpointSet{m: make(map[string]struct{}, len(endpoints))}
	for _, e := range endpoints {
		if e != "" {
			s.m[e] = struct{}{}
		}
	}
	return s
}

// Allows reports whether endpoint is in the set.
func (s *EndpointSet) Allows(endpoint string) bool {
	if s == nil {
		return false
	}
	_, ok := s.m[endpoint]
	return ok
}

// Len is the number of endpoints in the set.
func (s *EndpointSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}
