package host

import (
	"sync"

	"github.com/kvgate/kvgate/proxywasm"
)

// shared is the host-wide shared data and shared queues. Queues never
// notify (proxy_on_queue_ready is not called): guests may poll them.
type shared struct {
	mu     sync.Mutex
	data   map[string]sharedValue
	cas    uint32
	queues map[string]uint32
	items  map[uint32][][]byte
}

type sharedValue struct {
	v   []byte
	cas uint32
}

func (s *shared) set(key string, v []byte, cas uint32) proxywasm.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		s.data = map[string]sharedValue{}
	}
	old, ok := s.data[key]
	if cas != 0 && ok && old.cas != cas {
		return proxywasm.StatusCASMismatch
	}
	s.cas++
	if s.cas == 0 {
		s.cas = 1
	}
	s.data[key] = sharedValue{v, s.cas}
	return proxywasm.StatusOK
}

func (s *shared) get(key string) ([]byte, uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[key]
	return v.v, v.cas, ok
}

func (s *shared) register(vm, name string) uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues == nil {
		s.queues, s.items = map[string]uint32{}, map[uint32][][]byte{}
	}
	k := vm + "\x00" + name
	if id, ok := s.queues[k]; ok {
		return id
	}
	id := uint32(len(s.queues) + 1)
	s.queues[k] = id
	s.items[id] = nil
	return id
}

func (s *shared) resolve(vm, name string) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.queues[vm+"\x00"+name]
	return id, ok
}

func (s *shared) enqueue(id uint32, v []byte) proxywasm.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.items[id]
	if !ok {
		return proxywasm.StatusNotFound
	}
	s.items[id] = append(q, v)
	return proxywasm.StatusOK
}

func (s *shared) dequeue(id uint32) ([]byte, proxywasm.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.items[id]
	if !ok {
		return nil, proxywasm.StatusNotFound
	}
	if len(q) == 0 {
		return nil, proxywasm.StatusEmpty
	}
	v := q[0]
	s.items[id] = q[1:]
	return v, proxywasm.StatusOK
}
