// Package envoyconfig renders kvgate's committed Envoy bootstraps (package
// envoy) for the tests: with their own ports, certificates, module path,
// upstream and plugin configuration, as one with the filter's
// configuration delivered through ECDS, and checked by `envoy --mode
// validate`. It also reads a bootstrap into generic values for the tests
// that check one.
//
// A committed bootstrap is the template: Render keeps everything in it
// (stats tags, the filter's failure policy, the connection manager's
// address handling, TLS settings) and changes only addresses, certificate
// files, the module path and the plugin configuration, and what follows the
// plugin configuration's body limit (the buffer limits and Envoy's own 413
// message), so what the tests run is what operators deploy.
//
// Only tests use it. It is a package of its own rather than part of
// envoytest because it reads plugin configurations with filterspec, which
// imports kvhints, and kvhints' own tests import envoytest: envoytest
// importing it would be an import cycle.
package envoyconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/kvhints"
)

// Listener is one listener of a rendered bootstrap. Every listener is a
// copy of the committed one, on 127.0.0.1.
type Listener struct {
	// Name must be unique in the bootstrap.
	Name string
	// Port is the listener's port on 127.0.0.1.
	Port int
	// PluginConfig replaces the filter's configuration JSON; "" keeps the
	// committed one.
	PluginConfig string
	// NoFilter removes the wasm filter (a plain proxy, for comparisons).
	NoFilter bool
}

// TLSFiles are the PEM files of a TLS listener.
type TLSFiles struct {
	// Cert and Key are the server's certificate chain and private key.
	Cert, Key string
	// ClientCA holds the CA certificates that client certificates must
	// chain to.
	ClientCA string
}

// Options say what Render changes in a committed bootstrap.
type Options struct {
	// Template is the committed bootstrap to render: envoy.Bootstrap when
	// nil, or envoy.MTLSBootstrap or envoy.NativeBootstrap.
	Template []byte
	// TLS replaces the certificate files of a template with a TLS
	// listener; it is required for one and refused for the other.
	TLS *TLSFiles
	// AdminPort is the admin listener's port on 127.0.0.1.
	AdminPort int
	// Upstream is the worker's host:port (an IP address).
	Upstream string
	// ModulePath is the module's absolute path.
	ModulePath string
	// Listeners replace the committed listener; at least one.
	Listeners []Listener
	// Native swaps a template's wasm filter for envoy.NativeBootstrap's
	// native module filter (and its runtime flag), so that any committed
	// listener (envoy-mtls.yaml's) runs the native module; ModulePath is
	// then the shared library. A template with the native filter needs no
	// Native.
	Native bool
}

// Doc is a bootstrap as generic JSON values.
type Doc = map[string]any

// Parse reads a YAML or JSON bootstrap into generic values.
func Parse(b []byte) (Doc, error) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	var d Doc
	if err := json.Unmarshal(j, &d); err != nil {
		return nil, err
	}
	return d, nil
}

// Render returns the committed bootstrap changed as opts say, as JSON
// (which Envoy reads from a file named *.json or *.yaml).
func Render(opts Options) ([]byte, error) {
	tmplDoc := opts.Template
	if tmplDoc == nil {
		tmplDoc = envoy.Bootstrap
	}
	d, err := Parse(tmplDoc)
	if err != nil {
		return nil, err
	}
	if len(opts.Listeners) == 0 {
		return nil, errors.New("envoy: no listeners")
	}
	if opts.Native {
		if err := toNative(d); err != nil {
			return nil, err
		}
	}
	if err := set(d, []string{"admin", "address", "socket_address"}, addr("127.0.0.1", opts.AdminPort)); err != nil {
		return nil, err
	}
	host, port, err := splitHostPort(opts.Upstream)
	if err != nil {
		return nil, err
	}
	ep, err := dig(d, "static_resources", "clusters", 0, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address")
	if err != nil {
		return nil, err
	}
	ep.(Doc)["socket_address"] = addr(host, port)

	tmpl, err := dig(d, "static_resources", "listeners", 0)
	if err != nil {
		return nil, err
	}
	pc, err := PluginConfigOf(d)
	if err != nil {
		return nil, err
	}
	tmplLimit := bodyLimit(filterspec.DefaultMaxBodyBytes, pc)
	maxLimit := 0
	var ls []any
	for _, l := range opts.Listeners {
		c := deepCopy(tmpl).(Doc)
		c["name"] = l.Name
		c["address"] = Doc{"socket_address": addr("127.0.0.1", l.Port)}
		if err := setTLS(c, opts.TLS); err != nil {
			return nil, err
		}
		tc, err := dig(c, "filter_chains", 0, "filters", 0, "typed_config")
		if err != nil {
			return nil, err
		}
		hf, err := dig(tc, "http_filters")
		if err != nil {
			return nil, err
		}
		filters := hf.([]any)
		i, native := indexOfFilter(filters, envoy.WasmFilterName), false
		if i < 0 {
			i, native = indexOfFilter(filters, envoy.NativeFilterName), true
		}
		if i < 0 {
			return nil, errors.New("envoy: the committed listener has no wasm filter")
		}
		if l.NoFilter {
			filters = append(filters[:i:i], filters[i+1:]...)
		} else if native {
			if err := setNative(filters[i], l, opts.ModulePath); err != nil {
				return nil, err
			}
		} else {
			wc, err := dig(filters[i], "typed_config", "config")
			if err != nil {
				return nil, err
			}
			cfg := wc.(Doc)
			cfg["name"] = l.Name
			if err := set(cfg, []string{"vm_config", "code", "local"}, Doc{"filename": opts.ModulePath}); err != nil {
				return nil, err
			}
			if l.PluginConfig != "" {
				if err := set(cfg, []string{"configuration", "value"}, l.PluginConfig); err != nil {
					return nil, err
				}
			}
		}
		tc.(Doc)["http_filters"] = filters
		limit := bodyLimit(tmplLimit, l.PluginConfig)
		if err := setBodyLimit(c, limit); err != nil {
			return nil, err
		}
		maxLimit = max(maxLimit, limit)
		ls = append(ls, c)
	}
	d["static_resources"].(Doc)["listeners"] = ls
	cl, err := dig(d, "static_resources", "clusters", 0)
	if err != nil {
		return nil, err
	}
	cl.(Doc)["per_connection_buffer_limit_bytes"] = BufferLimit(maxLimit)
	return json.MarshalIndent(d, "", "  ")
}

// setNative points a native module filter at the shared library and gives
// it the listener's plugin configuration.
func setNative(f any, l Listener, module string) error {
	tc, err := dig(f, "typed_config")
	if err != nil {
		return err
	}
	c := tc.(Doc)
	c["filter_name"] = l.Name
	if err := set(c, []string{"dynamic_module_config", "module"}, Doc{"local": Doc{"filename": module}}); err != nil {
		return err
	}
	if l.PluginConfig != "" {
		return set(c, []string{"filter_config", "value"}, l.PluginConfig)
	}
	return nil
}

// toNative replaces the wasm filter of a parsed bootstrap's first listener
// with envoy.NativeBootstrap's native filter, keeping the plugin
// configuration, and takes envoy.NativeBootstrap's runtime layers.
func toNative(d Doc) error {
	nb, err := Parse(envoy.NativeBootstrap)
	if err != nil {
		return err
	}
	nc, err := NativeConfig(nb)
	if err != nil {
		return err
	}
	wc, err := WasmConfig(d)
	if err != nil {
		if _, nerr := NativeConfig(d); nerr == nil {
			return nil // already native
		}
		return err
	}
	if err := set(nc, []string{"filter_config", "value"}, stringAt(wc, "configuration", "value")); err != nil {
		return err
	}
	hf, err := dig(d, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "http_filters")
	if err != nil {
		return err
	}
	filters := hf.([]any)
	i := indexOfFilter(filters, envoy.WasmFilterName)
	filters[i] = Doc{"name": envoy.NativeFilterName, "typed_config": nc}
	d["layered_runtime"] = nb["layered_runtime"]
	return nil
}

// PluginConfigOf returns the plugin configuration JSON of the kvgate
// filter, wasm or native, of the first listener of a parsed bootstrap.
func PluginConfigOf(d Doc) (string, error) {
	if wc, err := WasmConfig(d); err == nil {
		return stringAt(wc, "configuration", "value"), nil
	}
	nc, err := NativeConfig(d)
	if err != nil {
		return "", errors.New("envoy: no wasm or native kvgate filter")
	}
	return stringAt(nc, "filter_config", "value"), nil
}

// NativeConfig returns the native module filter's typed_config (a
// DynamicModuleFilter) of the first listener of a parsed bootstrap.
func NativeConfig(d Doc) (Doc, error) {
	return firstListenerFilter(d, envoy.NativeFilterName, "native module filter", "typed_config")
}

// firstListenerFilter returns the value at path in the HTTP filter named
// name of the first listener of a parsed bootstrap; what names the filter
// in the error when there is none.
func firstListenerFilter(d Doc, name, what string, path ...any) (Doc, error) {
	hf, err := dig(d, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "http_filters")
	if err != nil {
		return nil, err
	}
	filters := hf.([]any)
	i := indexOfFilter(filters, name)
	if i < 0 {
		return nil, errors.New("envoy: no " + what)
	}
	c, err := dig(filters[i], path...)
	if err != nil {
		return nil, err
	}
	return c.(Doc), nil
}

// setTLS points a listener's TLS transport socket at files.
func setTLS(l Doc, files *TLSFiles) error {
	ts, err := dig(l, "filter_chains", 0, "transport_socket")
	if err != nil {
		if files != nil {
			return errors.New("envoy: TLS files given for a bootstrap without a TLS listener")
		}
		return nil
	}
	if files == nil {
		return errors.New("envoy: the bootstrap's listener is TLS: Options.TLS is required")
	}
	ctx, err := dig(ts, "typed_config", "common_tls_context")
	if err != nil {
		return err
	}
	c := ctx.(Doc)
	c["tls_certificates"] = []any{Doc{"certificate_chain": Doc{"filename": files.Cert}, "private_key": Doc{"filename": files.Key}}}
	return set(c, []string{"validation_context", "trusted_ca"}, Doc{"filename": files.ClientCA})
}

// BufferLimit is the per_connection_buffer_limit_bytes of the listener and
// the cluster for a filter body limit of maxBody bytes: the filter holds
// the whole body, so Envoy buffers it, with envoy.BufferHeadroom to spare.
func BufferLimit(maxBody int) int { return maxBody + envoy.BufferHeadroom }

// TooLargeBody is the body of Envoy's own 413 (local_reply_config, for a
// body that overflows Envoy's buffer before the filter answers) for a body
// limit of maxBody bytes: the filter's answer, word for word.
func TooLargeBody(maxBody int) string {
	return string(httperr.Invalid(413, kvhints.TooLargeMessage(maxBody)))
}

// bodyLimit returns the max_body_bytes of a plugin configuration, or def
// when it is "" (the committed one) or not one the filter accepts: Envoy
// then refuses it at start-up with the filter's own reason.
func bodyLimit(def int, pluginConfig string) int {
	if pluginConfig == "" {
		return def
	}
	cfg, err := filterspec.ParseConfig([]byte(pluginConfig))
	if err != nil {
		return def
	}
	return cfg.MaxBodyBytes
}

// setBodyLimit writes everything of a listener that follows the filter's
// body limit: its buffer limit and the message of its own 413.
func setBodyLimit(l Doc, maxBody int) error {
	l["per_connection_buffer_limit_bytes"] = BufferLimit(maxBody)
	m, err := TooLargeMapper(l)
	if err != nil {
		return err
	}
	return set(m, []string{"body", "inline_string"}, TooLargeBody(maxBody))
}

// TooLargeMapper returns the local_reply_config mapper of a listener that
// answers Envoy's own 413s.
func TooLargeMapper(l Doc) (Doc, error) {
	ms, err := dig(l, "filter_chains", 0, "filters", 0, "typed_config", "local_reply_config", "mappers")
	if err != nil {
		return nil, err
	}
	list, _ := ms.([]any)
	for _, m := range list {
		e, _ := dig(m, "filter", "extension_filter", "typed_config", "expression")
		if s, ok := e.(string); ok && strings.HasPrefix(s, "response.code == 413 ") {
			return m.(Doc), nil
		}
	}
	return nil, errors.New("envoy: the listener has no local_reply_config mapper for 413")
}

// stringAt returns the string at path, or "".
func stringAt(v any, path ...any) string {
	x, _ := dig(v, path...)
	s, _ := x.(string)
	return s
}

// WasmConfig returns the wasm filter's config (PluginConfig in Envoy's
// API) of the first listener of a parsed bootstrap.
func WasmConfig(d Doc) (Doc, error) {
	return firstListenerFilter(d, envoy.WasmFilterName, "wasm filter", "typed_config", "config")
}

// Dig follows a path of member names (string) and array indexes (int)
// through generic JSON values.
func Dig(v any, path ...any) (any, error) { return dig(v, path...) }

func dig(v any, path ...any) (any, error) {
	for n, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(Doc)
			if !ok {
				return nil, fmt.Errorf("envoy: %v: not an object", path[:n])
			}
			if v, ok = m[k]; !ok {
				return nil, fmt.Errorf("envoy: %v: missing", path[:n+1])
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil, fmt.Errorf("envoy: %v: no element %d", path[:n], k)
			}
			v = a[k]
		}
	}
	return v, nil
}

func set(d Doc, path []string, v any) error {
	for _, k := range path[:len(path)-1] {
		next, ok := d[k].(Doc)
		if !ok {
			return fmt.Errorf("envoy: %v: not an object", path)
		}
		d = next
	}
	d[path[len(path)-1]] = v
	return nil
}

func indexOfFilter(filters []any, name string) int {
	for i, f := range filters {
		if m, ok := f.(Doc); ok && m["name"] == name {
			return i
		}
	}
	return -1
}

func addr(host string, port int) Doc {
	return Doc{"address": host, "port_value": port}
}

func splitHostPort(hp string) (string, int, error) {
	for i := len(hp) - 1; i >= 0; i-- {
		if hp[i] == ':' {
			p, err := strconv.Atoi(hp[i+1:])
			if err != nil || p <= 0 || p > 65535 {
				break
			}
			return hp[:i], p, nil
		}
	}
	return "", 0, fmt.Errorf("envoy: upstream %q: want ip:port", hp)
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case Doc:
		m := make(Doc, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}
