package consumer

import (
	"errors"
	"slices"
	"strings"
)

// Family is a private integration key naming a group of backends that
// share action support. It is configuration, never a wire field, and
// several bindings can belong to one family.
type Family string

// ActionKey is an (action_type, action_version) pair. Both strings are
// compared exactly, byte for byte.
type ActionKey struct {
	Type    string `json:"type"`
	Version string `json:"version"`
}

// FetchKey returns the pair of the kv.fetch action at the one payload
// version this package can interpret.
func FetchKey() ActionKey { return ActionKey{Type: fetchType, Version: fetchVersion} }

// Capabilities records, for one request, which action pairs each family
// supports. It is fixed when built: later changes to the map or slices it
// was built from do not reach it, and its methods never change it, so one
// value may be shared freely. The zero value supports nothing.
type Capabilities struct {
	byFamily map[Family]map[ActionKey]struct{}
	// byKey lists the supporting families of each pair, sorted; the slices
	// are never changed after construction and are shared by candidates.
	byKey map[ActionKey][]Family
}

// NewCapabilities copies m into a Capabilities value. A family with no
// pairs is kept (it supports nothing). Empty family names, types or
// versions are configuration errors.
func NewCapabilities(m map[Family][]ActionKey) (Capabilities, error) {
	c := Capabilities{
		byFamily: make(map[Family]map[ActionKey]struct{}, len(m)),
		byKey:    make(map[ActionKey][]Family),
	}
	for f, keys := range m {
		if f == "" {
			return Capabilities{}, errors.New("consumer: empty family name")
		}
		set := make(map[ActionKey]struct{}, len(keys))
		for _, k := range keys {
			if k.Type == "" || k.Version == "" {
				return Capabilities{}, errors.New("consumer: family " + string(f) + ": empty action type or version")
			}
			if _, dup := set[k]; dup {
				continue
			}
			set[k] = struct{}{}
			c.byKey[k] = append(c.byKey[k], f)
		}
		c.byFamily[f] = set
	}
	for _, fs := range c.byKey {
		slices.Sort(fs)
	}
	return c, nil
}

// MustCapabilities is NewCapabilities for fixed configurations; it panics
// on an error.
func MustCapabilities(m map[Family][]ActionKey) Capabilities {
	c, err := NewCapabilities(m)
	if err != nil {
		panic(err)
	}
	return c
}

// Supports reports whether family f supports the pair k.
func (c Capabilities) Supports(f Family, k ActionKey) bool {
	_, ok := c.byFamily[f][k]
	return ok
}

// Families returns the configured families in sorted order.
func (c Capabilities) Families() []Family {
	out := make([]Family, 0, len(c.byFamily))
	for f := range c.byFamily {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// Empty reports whether no family supports any pair.
func (c Capabilities) Empty() bool { return len(c.byKey) == 0 }

// supporting returns the shared, sorted, read-only list of families that
// support k, or nil.
func (c Capabilities) supporting(k ActionKey) []Family { return c.byKey[k] }

// String lists the families and their pairs in sorted order.
func (c Capabilities) String() string {
	var b strings.Builder
	b.WriteString("consumer.Capabilities{")
	for i, f := range c.Families() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(f))
		b.WriteString(":")
		keys := make([]string, 0, len(c.byFamily[f]))
		for k := range c.byFamily[f] {
			keys = append(keys, k.Type+"@"+k.Version)
		}
		slices.Sort(keys)
		b.WriteString("[" + strings.Join(keys, " ") + "]")
	}
	b.WriteString("}")
	return b.String()
}
