package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/kvhints/consumer"
)

const planUsage = `Usage: kvhints plan --config CONFIG [--max-depth N] FILE|-

Shows what a worker's hint consumer (package kvhints/consumer) would do with
one KV hint envelope (the value of a kv_hints member): admit it, collect the
kv.fetch candidates its capabilities support, take the first one, resolve it
to a binding, check the endpoint against the registry and ask the provider to
validate it. Nothing is contacted. It prints one JSON line on stdout:

  {"path":"named_fetch","reason":null,"detail":"...","admission":"admitted",
   "collected":true,"candidates":1,"unknown_action_types":0,
   "unmatched_fetch_versions":0,"action":0,"action_id":"a1",
   "families":["trtllm"],"binding":"kvcm-a","endpoint":"tcp://...",
   "pd":{...}}

  path       "named_fetch" (fetch by name first, then the paired source)
             or "paired" (the paired path only, no added work).
  reason     why the path is paired, null for named_fetch: excluded_lora,
             not_generation_only, absent, discarded, unsupported,
             unresolved_missing, ambiguous, unauthorized, request_paired,
             payload_invalid, endpoint_not_registered, provider_rejected.
  admission  "admitted", "null" (no hint) or the admission reason
             (unknown_version, oversized, malformed).
  pd         the request's P/D handoff parameters, as given: hints never
             change them.
  action, action_id, families, binding, endpoint
             the selected candidate as far as the decision got, else null.

CONFIG is a JSON file (unknown fields are an error):

  {
    "capabilities": {"FAMILY": [{"type":"kv.fetch","version":"1.0"}]},
    "bindings": [{"name":"B","family":"FAMILY","authorized":true,
                  "request_paired":false,
                  "capabilities":[{"type":"kv.fetch","version":"1.0"}]}],
    "registry": ["tcp://HOST:PORT"],
    "provider_allowlist": ["tcp://HOST:PORT"],
    "request": {"lora":false,"generation_only":true,
                "pd":{"required":true,"ctx_request_id":7,"source":"...",
                      "opaque_state":"..."}}
  }

  registry is the orchestration's server-controlled endpoint list;
  provider_allowlist is the provider's own, checked independently (default:
  the same entries as registry).

Flags:
  --config CONFIG  the configuration file (required)
  --max-depth N    admission nesting limit, N >= 1 (default 128)

Exit status: 0 named fetch, 1 paired path, 2 usage, configuration or I/O
error.
`

// planConfig is the --config file.
type planConfig struct {
	Capabilities      map[consumer.Family][]consumer.ActionKey `json:"capabilities"`
	Bindings          []consumer.Binding                       `json:"bindings"`
	Registry          []string                                 `json:"registry"`
	ProviderAllowlist *[]string                                `json:"provider_allowlist"`
	Request           struct {
		LoRA           bool             `json:"lora"`
		GenerationOnly bool             `json:"generation_only"`
		PD             consumer.Handoff `json:"pd"`
	} `json:"request"`
}

// planResult is the line plan prints. Nil pointers print as null.
type planResult struct {
	Path             consumer.Path     `json:"path"`
	Reason           *string           `json:"reason"`
	Detail           string            `json:"detail"`
	Admission        string            `json:"admission"`
	Collected        bool              `json:"collected"`
	Candidates       int               `json:"candidates"`
	UnknownTypes     int               `json:"unknown_action_types"`
	UnmatchedVersion int               `json:"unmatched_fetch_versions"`
	Action           *int              `json:"action"`
	ActionID         *string           `json:"action_id"`
	Families         []consumer.Family `json:"families"`
	Binding          *string           `json:"binding"`
	Endpoint         *string           `json:"endpoint"`
	PD               consumer.Handoff  `json:"pd"`
}

// runPlan is "kvhints plan": decide one envelope under a configuration.
func runPlan(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var configPath string
	fs.StringVar(&configPath, "config", "", "configuration file")
	maxDepth := kvhints.DefaultMaxDepth
	fs.Var(intFlag{&maxDepth, 1}, "max-depth", "nesting limit")
	file, code, ok := parseArgs(fs, planUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if configPath == "" {
		fmt.Fprintf(stderr, "plan: --config is required\n%s", usageHint("plan", planUsage))
		return exitUsage
	}
	if configPath == "-" && file == "-" {
		fmt.Fprintf(stderr, "plan: the configuration and the envelope cannot both be standard input\n")
		return exitUsage
	}
	orch, req, caps, err := loadPlanConfig(configPath, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints plan: config %s: %v\n", configPath, err)
		return exitUsage
	}
	raw, err := readInput(file, stdin, 0)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints plan: %v\n", err)
		return exitUsage
	}

	snap, reason := kvhints.Admit(raw, kvhints.Limits{MaxDepth: maxDepth})
	d := orch.Plan(req, consumer.Hint{Snapshot: snap, Discarded: reason}, caps)

	res := planResult{
		Path: d.Path, Detail: d.Detail, Collected: d.Collected,
		Candidates: d.Candidates, UnknownTypes: d.UnknownType, UnmatchedVersion: d.UnmatchedVersion,
		Families: d.Families, PD: d.Handoff,
	}
	switch {
	case snap != nil:
		res.Admission = "admitted"
	case reason != kvhints.ReasonNone:
		res.Admission = reason.String()
	default:
		res.Admission = "null"
	}
	if d.Reason != consumer.ReasonNone {
		s := d.Reason.String()
		res.Reason = &s
	}
	if d.Action >= 0 {
		a, id := d.Action, snap.Action(d.Action).ID()
		res.Action, res.ActionID = &a, &id
	}
	if d.Binding != "" {
		res.Binding = &d.Binding
	}
	if d.Endpoint != "" {
		res.Endpoint = &d.Endpoint
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints plan: %v\n", err)
		return exitUsage
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		fmt.Fprintf(stderr, "kvhints plan: writing result: %v\n", err)
		return exitUsage
	}
	if d.Path == consumer.PathNamedFetch {
		return exitOK
	}
	return exitRejected
}

// loadPlanConfig reads the configuration and builds the orchestrator. The
// provider it gets has no dialer: plan only ever asks it to validate.
func loadPlanConfig(path string, stdin io.Reader) (*consumer.Orchestrator, consumer.Request, consumer.Capabilities, error) {
	var req consumer.Request
	raw, err := readInput(path, stdin, 0)
	if err != nil {
		return nil, req, consumer.Capabilities{}, err
	}
	var cfg planConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, req, consumer.Capabilities{}, err
	}
	if dec.More() {
		return nil, req, consumer.Capabilities{}, errors.New("data after the configuration object")
	}
	caps, err := consumer.NewCapabilities(cfg.Capabilities)
	if err != nil {
		return nil, req, consumer.Capabilities{}, err
	}
	bindings, err := consumer.NewBindings(cfg.Bindings...)
	if err != nil {
		return nil, req, consumer.Capabilities{}, err
	}
	allow := cfg.Registry
	if cfg.ProviderAllowlist != nil {
		allow = *cfg.ProviderAllowlist
	}
	provider := consumer.NewFetchProvider(consumer.NewEndpointSet(allow...), nil, nil)
	orch := consumer.NewOrchestrator(bindings, consumer.NewEndpointSet(cfg.Registry...), provider)
	req = consumer.Request{LoRA: cfg.Request.LoRA, GenerationOnly: cfg.Request.GenerationOnly, Handoff: cfg.Request.PD}
	return orch, req, caps, nil
}
