package consumer

import (
	"errors"
	"slices"
)

// Binding is one configured backend: a concrete integration a named fetch
// can be handed to. Bindings come from trusted server configuration, never
// from a hint.
type Binding struct {
	// Name identifies the binding in decisions and logs.
	Name string `json:"name"`
	// Family is the capability family the binding belongs to.
	Family Family `json:"family"`
	// Authorized says the server allows hint-directed fetches through it.
	Authorized bool `json:"authorized"`
	// RequestPaired marks a binding that serves request-paired P/D
	// handoff. A kv.fetch names KV by content, so it never maps to one.
	RequestPaired bool `json:"request_paired"`
	// Capabilities are the action pairs this binding itself handles. A
	// family match does not prove that every binding in it can process an
	// action; this list does.
	Capabilities []ActionKey `json:"capabilities"`
}

// Bindings is the trusted mapping from a candidate to the one binding that
// may serve it. It is fixed when built and safe for concurrent use.
type Bindings struct {
	list []binding
}

type binding struct {
	Binding
	caps map[ActionKey]struct{}
}

// NewBindings copies bs into a trusted mapping. Names must be non-empty
// and unique, and every binding needs a family. The order of bs never
// influences which binding a candidate resolves to.
func NewBindings(bs ...Binding) (*Bindings, error) {
	out := &Bindings{list: make([]binding, 0, len(bs))}
	seen := make(map[string]bool, len(bs))
	for _, b := range bs {
		if b.Name == "" {
			return nil, errors.New("consumer: binding with an empty name")
		}
		if b.Family == "" {
			return nil, errors.New("consumer: binding " + b.Name + ": empty family")
		}
		if seen[b.Name] {
			return nil, errors.New("consumer: binding " + b.Name + " configured twice")
		}
		seen[b.Name] = true
		b.Capabilities = slices.Clone(b.Capabilities)
		set := make(map[ActionKey]struct{}, len(b.Capabilities))
		for _, k := range b.Capabilities {
			set[k] = struct{}{}
		}
		out.list = append(out.list, binding{Binding: b, caps: set})
	}
	return out, nil
}

// MustBindings is NewBindings for fixed configurations; it panics on an
// error.
func MustBindings(bs ...Binding) *Bindings {
	b, err := NewBindings(bs...)
	if err != nil {
		panic(err)
	}
	return b
}

// Resolve finds the binding for candidate c, in the seed's order: first
// the trusted mapping, then the binding's capability. The mapping
// considers every configured binding in one of c's supporting families:
// with none, it is missing; with none of them authorized, unauthorized;
// with more than one authorized, ambiguous, because no order of
// registration may choose, and that holds even when only one of them can
// handle the action (a family match is all the mapping knows). Only then
// is the one authorized binding's own capability checked: when its
// capabilities do not include c's action pair it is returned with
// ReasonUnresolved, so the caller can say which binding it was. A capable
// binding is returned with ReasonNone, or with ReasonRequestPaired when
// it serves request-paired handoff. Resolve never picks a second binding
// when the first is refused.
func (bs *Bindings) Resolve(c Candidate) (Binding, Reason) {
	if bs == nil {
		return Binding{}, ReasonUnresolved
	}
	var configured, authorized int
	var found *binding
	for i := range bs.list {
		b := &bs.list[i]
		if !c.SupportedBy(b.Family) {
			continue
		}
		configured++
		if b.Authorized {
			authorized++
			found = b
		}
	}
	switch {
	case configured == 0:
		return Binding{}, ReasonUnresolved
	case authorized == 0:
		return Binding{}, ReasonUnauthorized
	case authorized > 1:
		return Binding{}, ReasonAmbiguous
	}
	out := found.Binding
	out.Capabilities = slices.Clone(out.Capabilities)
	if _, ok := found.caps[c.key]; !ok {
		return out, ReasonUnresolved
	}
	if out.RequestPaired {
		return out, ReasonRequestPaired
	}
	return out, ReasonNone
}
