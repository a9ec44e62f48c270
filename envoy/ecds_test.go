package envoy_test

import (
	"reflect"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// envoy-ecds.yaml and kvgate-filter.yaml are envoy.yaml by construction:
// ToECDS of envoy.yaml gives both. (TestValidate: Envoy accepts the pair.)
func TestECDSBootstrap(t *testing.T) {
	b, r, err := envoyconfig.ToECDS(envoy.Bootstrap, "/etc/kvgate/ecds/kvgate-filter.yaml", "/etc/kvgate/ecds")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want []byte
	}{{"envoy-ecds.yaml", b, envoy.ECDSBootstrap}, {"kvgate-filter.yaml", r, envoy.FilterResource}} {
		g, err := envoyconfig.Parse(c.got)
		if err != nil {
			t.Fatal(err)
		}
		w, err := envoyconfig.Parse(c.want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s is not what ToECDS makes of envoy.yaml", c.name)
		}
	}
}
