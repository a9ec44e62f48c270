package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvgate/kvgate/kvhints"
)

// Handoff holds a request's required P/D handoff parameters. They come
// from the disaggregation layer, never from a hint: the orchestration
// copies them into every Decision by value and never reads or changes
// them. The type is comparable and holds no references, so nothing
// derived from a hint can alias it.
type Handoff struct {
	// Required says the request must receive KV from its paired context
	// worker.
	Required bool `json:"required"`
	// ContextRequestID is the paired context request.
	ContextRequestID uint64 `json:"ctx_request_id"`
	// Source identifies the paired context worker.
	Source string `json:"source"`
	// OpaqueState is the P/D layer's own state, carried as given.
	OpaqueState string `json:"opaque_state"`
}

// Request is what the orchestration needs to know about a request besides
// its hint.
type Request struct {
	// LoRA says the request uses a LoRA adapter; such requests never take
	// a hinted fetch and never reach candidate collection.
	LoRA bool
	// GenerationOnly says the request is the generation half of a P/D
	// pair; only such requests may opt into named fetch.
	GenerationOnly bool
	// Handoff are the request's P/D parameters, passed through untouched.
	Handoff Handoff
}

// Hint is the outcome of admission for the request's kv_hints value, as
// kvhints.Admit returns it: an admitted snapshot, or nil and the reason
// the value was ignored (ReasonNone when there was no hint at all).
type Hint struct {
	Snapshot  *kvhints.Snapshot
	Discarded kvhints.Reason
}

// Path is the way a request gets its KV.
type Path uint8

const (
	// PathPaired keeps the existing paired path with no added named
	// lookup or transfer work.
	PathPaired Path = iota
	// PathNamedFetch attempts a named fetch before the paired source.
	PathNamedFetch
)

var pathNames = [...]string{PathPaired: "paired", PathNamedFetch: "named_fetch"}

// String returns "paired" or "named_fetch".
func (p Path) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// MarshalText returns the path's name.
func (p Path) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Reason says why a request keeps the paired path; ReasonNone means it
// does not.
type Reason uint8

// The reasons, in the order the orchestration checks them.
const (
	ReasonNone Reason = iota
	// ReasonExcludedLoRA: the request uses a LoRA adapter.
	ReasonExcludedLoRA
	// ReasonNotGenerationOnly: the request is not generation-only.
	ReasonNotGenerationOnly
	// ReasonAbsent: the request carries no hint.
	ReasonAbsent
	// ReasonDiscarded: admission ignored the hint.
	ReasonDiscarded
	// ReasonUnsupported: no kv.fetch action matches the capabilities.
	ReasonUnsupported
	// ReasonUnresolved: no binding is configured in the candidate's
	// supporting families, or the one authorized binding there does not
	// handle its action (Decision.Binding then names it).
	ReasonUnresolved
	// ReasonAmbiguous: more than one authorized binding in the
	// candidate's supporting families, whatever their capabilities.
	ReasonAmbiguous
	// ReasonUnauthorized: bindings are configured in the supporting
	// families, none is authorized.
	ReasonUnauthorized
	// ReasonRequestPaired: the binding serves request-paired handoff.
	ReasonRequestPaired
	// ReasonPayloadInvalid: the action's payload cannot be read.
	ReasonPayloadInvalid
	// ReasonEndpointNotRegistered: the server's registry does not list
	// the endpoint.
	ReasonEndpointNotRegistered
	// ReasonProviderRejected: the provider's own validation refused it.
	ReasonProviderRejected
)

var reasonNames = [...]string{
	ReasonNone:                  "",
	ReasonExcludedLoRA:          "excluded_lora",
	ReasonNotGenerationOnly:     "not_generation_only",
	ReasonAbsent:                "absent",
	ReasonDiscarded:             "discarded",
	ReasonUnsupported:           "unsupported",
	ReasonUnresolved:            "unresolved_missing",
	ReasonAmbiguous:             "ambiguous",
	ReasonUnauthorized:          "unauthorized",
	ReasonRequestPaired:         "request_paired",
	ReasonPayloadInvalid:        "payload_invalid",
	ReasonEndpointNotRegistered: "endpoint_not_registered",
	ReasonProviderRejected:      "provider_rejected",
}

// String returns the reason's name ("absent", ...), or "" for ReasonNone.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// MarshalText returns the reason's name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// FetchResult is what became of a planned named fetch.
type FetchResult uint8

const (
	// FetchNotRun: no named fetch was started (not planned, or not run yet).
	FetchNotRun FetchResult = iota
	// FetchSucceeded: the provider fetched the named KV.
	FetchSucceeded
	// FetchFailed: the provider started and failed; the paired source
	// follows as usual.
	FetchFailed
)

var fetchNames = [...]string{FetchNotRun: "not-run", FetchSucceeded: "succeeded", FetchFailed: "failed"}

// String returns "not-run", "succeeded" or "failed".
func (f FetchResult) String() string {
	if int(f) < len(fetchNames) {
		return fetchNames[f]
	}
	return fmt.Sprintf("FetchResult(%d)", uint8(f))
}

// MarshalText returns the result's name.
func (f FetchResult) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// Decision is what the orchestration does with one request.
type Decision struct {
	// Path is how the request gets its KV. The paired source is used
	// after a named fetch too, under the unchanged Handoff.
	Path Path
	// Reason says why the path is PathPaired; ReasonNone for a named fetch.
	Reason Reason
	// Detail explains Reason for operators; it never quotes the hint.
	Detail string
	// Handoff is Request.Handoff, copied unchanged.
	Handoff Handoff

	// Collected says candidate collection ran.
	Collected bool
	// Candidates, UnknownType and UnmatchedVersion are the collection's
	// counts, once per request.
	Candidates, UnknownType, UnmatchedVersion int

	// Action is the selected candidate's position, or -1.
	Action int
	// Families are the selected candidate's supporting families.
	Families []Family
	// Binding is the resolved binding's name, when one was resolved.
	Binding string
	// Endpoint is the selected action's source_control_endpoint, when its
	// payload could be read. It is reported, not trusted.
	Endpoint string

	// Fetch and FetchErr are set by Orchestrator.Run.
	Fetch    FetchResult
	FetchErr error

	hint *FetchHint // the hint to hand to the provider, for PathNamedFetch
}

// String describes the decision without any hint contents, so logging a
// decision is safe.
func (d Decision) String() string {
	s := "consumer.Decision(" + d.Path.String()
	if d.Reason != ReasonNone {
		s += " " + d.Reason.String()
	}
	if d.Action >= 0 {
		s += fmt.Sprintf(" action=%d", d.Action)
	}
	if d.Binding != "" {
		s += " binding=" + d.Binding
	}
	if d.Fetch != FetchNotRun {
		s += " fetch=" + d.Fetch.String()
	}
	return s + ")"
}

// Orchestrator applies the hinted-fetch policy. Its configuration is
// fixed at construction; it is safe for concurrent use when its Registry
// and Provider are.
type Orchestrator struct {
	bindings *Bindings
	registry Registry
	provider Provider

	// Test hooks. skipRegistryCheck turns the runtime guard off to show
	// that the provider blocks alone; collect observes collection.
	skipRegistryCheck bool
	collect           func(*kvhints.Snapshot, Capabilities) Collection
}

// NewOrchestrator returns an orchestrator over the trusted binding
// mapping, the server-controlled endpoint registry and the provider that
// performs named fetches. A nil registry allows nothing; a nil provider
// rejects everything.
func NewOrchestrator(bindings *Bindings, registry Registry, provider Provider) *Orchestrator {
	return &Orchestrator{bindings: bindings, registry: registry, provider: provider, collect: Collect}
}

// Plan decides a request without starting any transfer. In order: a LoRA
// request or one that is not generation-only is excluded before its hint
// is looked at; an absent or discarded hint keeps the paired path; the
// first candidate of Collect is the only one considered; it must resolve
// to exactly one authorized binding that is not request-paired; its
// payload must be a valid kv.fetch 1.0 payload; its endpoint must be in
// the registry; and the provider's own Validate must accept the
// one-action envelope. The first check that fails decides the reason,
// and no other candidate, family or binding is tried.
//
// Plan makes no connection; the only provider call is Validate, which by
// contract makes none either.
func (o *Orchestrator) Plan(req Request, hint Hint, caps Capabilities) Decision {
	d := Decision{Path: PathPaired, Handoff: req.Handoff, Action: -1}
	switch {
	case req.LoRA:
		return d.paired(ReasonExcludedLoRA, "requests with a LoRA adapter take no hinted fetch")
	case !req.GenerationOnly:
		return d.paired(ReasonNotGenerationOnly, "only generation-only requests opt into named fetch")
	case hint.Snapshot == nil && hint.Discarded != kvhints.ReasonNone:
		return d.paired(ReasonDiscarded, "admission ignored the hint: "+hint.Discarded.String())
	case hint.Snapshot == nil:
		return d.paired(ReasonAbsent, "the request has no hint")
	}

	col := o.collect(hint.Snapshot, caps)
	d.Collected = true
	d.Candidates, d.UnknownType, d.UnmatchedVersion = len(col.Candidates), col.UnknownType, col.UnmatchedVersion
	if len(col.Candidates) == 0 {
		return d.paired(ReasonUnsupported, "no kv.fetch action matches a family's capabilities")
	}

	// The first candidate only. The rest are not a retry list.
	c := col.Candidates[0]
	d.Action, d.Families = c.Index(), c.Families()

	b, r := o.bindings.Resolve(c)
	d.Binding = b.Name
	switch {
	case r == ReasonUnresolved && b.Name != "":
		return d.paired(r, "the one authorized binding in the supporting families does not handle the action")
	case r == ReasonUnresolved:
		return d.paired(r, "no binding is configured in the supporting families")
	case r == ReasonUnauthorized:
		return d.paired(r, "no binding in the supporting families is authorized")
	case r == ReasonAmbiguous:
		return d.paired(r, "more than one authorized binding in the supporting families")
	case r == ReasonRequestPaired:
		return d.paired(r, "a kv.fetch never maps to a request-paired binding")
	}

	pl, err := fetchPayloadOf(c.Action())
	if err != nil {
		return d.paired(ReasonPayloadInvalid, err.Error())
	}
	d.Endpoint = pl.SourceControlEndpoint

	if !o.registered(pl.SourceControlEndpoint) {
		return d.paired(ReasonEndpointNotRegistered, "the endpoint is not in the server's registry")
	}

	h := FetchHint{Binding: b.Name, Family: b.Family, Envelope: c.Envelope()}
	if o.provider == nil {
		return d.paired(ReasonProviderRejected, "no provider is configured")
	}
	if err := o.provider.Validate(h); err != nil {
		return d.paired(ReasonProviderRejected, err.Error())
	}
	d.Path, d.Detail, d.hint = PathNamedFetch, "named fetch first, then the paired source", &h
	return d
}

// Run carries out a planned named fetch: it checks the endpoint against
// the registry once more, right before the provider is called, then calls
// the provider's Fetch. A decision for the paired path is returned as it
// is. A provider rejection turns the decision into the paired path with
// ReasonProviderRejected; a failure after the provider started is
// reported as FetchFailed, and the paired source follows as usual. The
// Handoff is never changed.
func (o *Orchestrator) Run(ctx context.Context, d Decision) Decision {
	if d.Path != PathNamedFetch || d.hint == nil {
		return d
	}
	h := *d.hint
	d.hint = nil
	pl, err := fetchPayloadOf(h.Envelope.Action(0))
	if err != nil {
		return d.paired(ReasonPayloadInvalid, err.Error())
	}
	if !o.registered(pl.SourceControlEndpoint) {
		return d.paired(ReasonEndpointNotRegistered, "the endpoint is not in the server's registry")
	}
	if o.provider == nil {
		return d.paired(ReasonProviderRejected, "no provider is configured")
	}
	if err := o.provider.Fetch(ctx, h); err != nil {
		if errors.Is(err, ErrRejected) {
			return d.paired(ReasonProviderRejected, err.Error())
		}
		d.Fetch, d.FetchErr = FetchFailed, err
		return d
	}
	d.Fetch = FetchSucceeded
	return d
}

// Decide is Plan followed by Run.
func (o *Orchestrator) Decide(ctx context.Context, req Request, hint Hint, caps Capabilities) Decision {
	return o.Run(ctx, o.Plan(req, hint, caps))
}

// registered is the runtime guard: the one server-controlled registry.
func (o *Orchestrator) registered(endpoint string) bool {
	if o.skipRegistryCheck {
		return true
	}
	return o.registry != nil && o.registry.Allows(endpoint)
}

func (d Decision) paired(r Reason, detail string) Decision {
	d.Path, d.Reason, d.Detail, d.hint = PathPaired, r, detail, nil
	return d
}
