package consumer

import (
	"slices"

	"github.com/kvgate/kvgate/kvhints"
)

const (
	fetchType    = kvhints.FetchActionType
	fetchVersion = kvhints.FetchActionVersion
)

// Candidate is one supported kv.fetch action of an admitted envelope. It
// shares the envelope's snapshot (nothing is copied until it is read) and
// keeps the action's position in producer order.
type Candidate struct {
	snap  *kvhints.Snapshot
	index int
	key   ActionKey
	// families is shared with the Capabilities it came from; read-only.
	families []Family
}

// Index is the action's position in the envelope's actions array.
func (c Candidate) Index() int { return c.index }

// Key is the action's (action_type, action_version) pair.
func (c Candidate) Key() ActionKey { return c.key }

// Action returns a view of the action in the shared snapshot.
func (c Candidate) Action() kvhints.ActionView { return c.snap.Action(c.index) }

// Snapshot returns the shared admitted envelope the candidate belongs to.
func (c Candidate) Snapshot() *kvhints.Snapshot { return c.snap }

// Envelope returns the one-action envelope of the candidate: the protocol
// version, message id and extra metadata of the envelope with the complete
// action as its only entry. It is built on each call.
func (c Candidate) Envelope() *kvhints.Snapshot { return c.snap.Action(c.index).Envelope() }

// Families returns the families that support the action, as a new sorted
// slice. The set has no order of preference; sorting only makes output
// stable.
func (c Candidate) Families() []Family { return slices.Clone(c.families) }

// SupportedBy reports whether family f supports the action.
func (c Candidate) SupportedBy(f Family) bool {
	_, ok := slices.BinarySearch(c.families, f)
	return ok
}

// Collection is the result of Collect.
type Collection struct {
	// Candidates are the supported kv.fetch actions in producer order.
	Candidates []Candidate
	// UnknownType counts actions whose type is not kv.fetch.
	UnknownType int
	// UnmatchedVersion counts kv.fetch actions whose version no family
	// supports.
	UnmatchedVersion int
}

// Collect lists the kv.fetch actions of s that at least one family of caps
// supports at exactly the action's type and version, in producer order.
// Each action is either a candidate or counted once, in UnknownType or in
// UnmatchedVersion, however many families are configured; so the three
// always add up to s.NumActions(). Repeated action ids are kept as they
// are. A nil snapshot or empty capabilities give no candidates.
//
// Collect reads only the action types and versions: it never interprets a
// payload, does no I/O and keeps no state between calls.
func Collect(s *kvhints.Snapshot, caps Capabilities) Collection {
	var col Collection
	if s == nil {
		return col
	}
	for i := range s.NumActions() {
		v := s.Action(i)
		typ := v.Type()
		if typ != fetchType {
			col.UnknownType++
			continue
		}
		k := ActionKey{Type: typ, Version: v.Version()}
		fams := caps.supporting(k)
		if len(fams) == 0 {
			col.UnmatchedVersion++
			continue
		}
		col.Candidates = append(col.Candidates, Candidate{snap: s, index: i, key: k, families: fams})
	}
	return col
}
