// Package filterspec describes the kvgate filter to the hosts that run it:
// everything a host, a renderer or a check must know about the guest,
// without the guest's code.
//
//   - Its configuration: the plugin configuration document and its one
//     reader, ParseConfig (docs/spec.md, Plugin configuration), with the
//     trusted_senders rules it compiles (Senders). The wasm filter, the
//     native Envoy module, the sidecar (for its flags, -check-config and
//     reloads), the Envoy renderer and the chart's checks all read a
//     document here, so they accept the same documents with the same
//     errors.
//   - Its metrics: one table of families (Families), which yields the
//     series names the guest defines (MetricNames), the help texts
//     (MetricHelp) and Envoy's stats_tags (EnvoyStatsTags). Adding a
//     metric is a row in the table, the place in filter/ that counts it
//     and go generate, which writes the stats_tags (internal/statstags).
//   - The properties it reads (the sender's identity) and sets (what
//     became of the hint), under their proxy-wasm paths.
//   - Its local replies, its memory needs at a body limit (MemoryAt) and
//     its version.
//
// The package is compiled into the wasm guest too, so it follows the
// guest's rules: no fmt, no reflection, nothing that runs per request
// beyond Senders.Match and Config.Excluded.
package filterspec
