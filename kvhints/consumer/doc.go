// Package consumer is the worker side of a KV hint: it turns an admitted
// envelope into at most one named fetch, or into the reason the request
// keeps its paired (P/D) path unchanged.
//
// The package does no I/O of its own. Connections are opened only by a
// Provider, through a Dialer the caller supplies, and only after two
// independent checks have passed: the orchestration's lookup of the
// endpoint in a server-controlled Registry, and the provider's own
// validation of the action version, payload and destination.
//
// The steps, each usable on its own:
//
//   - Capabilities: a per-request, immutable map from backend family (a
//     private integration key, never read from the wire) to the
//     (action_type, action_version) pairs the family handles.
//   - Collect: the kv.fetch actions of an envelope that some family
//     handles, in producer order, with counts of the actions it skipped.
//   - ParseFetchPayload: the payload of a kv.fetch 1.0 action.
//   - Orchestrator.Plan and Orchestrator.Run: request eligibility, first
//     candidate selection, trusted binding resolution, the registry check
//     and the provider hand-off.
//
// The P/D handoff parameters of a request are an input of their own
// (Handoff). They are copied into every Decision by value and are never
// read from, or changed because of, a hint.
package consumer
