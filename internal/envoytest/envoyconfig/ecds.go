package envoyconfig

import (
	"encoding/json"
	"errors"

	"github.com/kvgate/kvgate/envoy"
)

const typedExtensionConfig = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

// ToECDS turns a bootstrap whose listeners run the wasm filter into one
// whose filter comes through ECDS from the file path (watched in its
// directory dir), and returns it with that file's content: the wasm
// filter of the first listener as a TypedExtensionConfig. Every listener
// gets the same filter. It is how envoy-ecds.yaml and kvgate-filter.yaml
// follow from envoy.yaml, and how tests render one from a rendered
// bootstrap.
func ToECDS(bootstrap []byte, path, dir string) (ecdsBootstrap, resource []byte, err error) {
	d, err := Parse(bootstrap)
	if err != nil {
		return nil, nil, err
	}
	ls, err := dig(d, "static_resources", "listeners")
	if err != nil {
		return nil, nil, err
	}
	var filter any
	for _, l := range ls.([]any) {
		hf, err := dig(l, "filter_chains", 0, "filters", 0, "typed_config", "http_filters")
		if err != nil {
			return nil, nil, err
		}
		filters := hf.([]any)
		i := indexOfFilter(filters, envoy.WasmFilterName)
		if i < 0 {
			return nil, nil, errors.New("envoy: a listener has no wasm filter")
		}
		if filter == nil {
			filter = filters[i].(Doc)["typed_config"]
		}
		filters[i] = Doc{"name": envoy.ECDSName, "config_discovery": Doc{
			"config_source": Doc{
				"path_config_source":   Doc{"path": path, "watched_directory": Doc{"path": dir}},
				"resource_api_version": "V3",
			},
			"type_urls": []any{"type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"},
		}}
	}
	// A discovered resource needs a node identity (Envoy refuses to start
	// without one).
	if _, ok := d["node"]; !ok {
		d["node"] = Doc{"id": envoy.ECDSName, "cluster": envoy.ECDSName}
	}
	if ecdsBootstrap, err = json.Marshal(d); err != nil {
		return nil, nil, err
	}
	resource, err = json.Marshal(Doc{"resources": []any{Doc{"@type": typedExtensionConfig, "name": envoy.ECDSName, "typed_config": filter}}})
	return ecdsBootstrap, resource, err
}

// WithPluginConfig returns an ECDS filter file (envoy.FilterResource, or one
// ToECDS made) with its plugin configuration replaced.
func WithPluginConfig(resource []byte, pluginConfig string) ([]byte, error) {
	d, err := Parse(resource)
	if err != nil {
		return nil, err
	}
	c, err := dig(d, "resources", 0, "typed_config", "config")
	if err != nil {
		return nil, err
	}
	if err := set(c.(Doc), []string{"configuration", "value"}, pluginConfig); err != nil {
		return nil, err
	}
	return json.Marshal(d)
}
