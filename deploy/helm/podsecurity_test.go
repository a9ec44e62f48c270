package helm

import (
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// podSecurity evaluates a pod spec with the Pod Security admission's own
// checks (the library kube-apiserver runs for the
// pod-security.kubernetes.io/enforce label) at level, latest version.
func podSecurity(t *testing.T, tmpl corev1.PodTemplateSpec, level api.Level) []string {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range ev.EvaluatePod(api.LevelVersion{Level: level, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec) {
		if !r.Allowed {
			out = append(out, r.ForbiddenReason+": "+r.ForbiddenDetail)
		}
	}
	return out
}

// The pods the chart renders pass PodSecurity "restricted", the worker's
// defaults included, for the defaults and every ci/ file; a worker
// securityContext that an operator loosens for a root GPU image is what
// the check then finds (so the check is not blind).
func TestPodSecurityRestricted(t *testing.T) {
	c := loadChart(t)
	for _, f := range append(valuesFiles(t), "") {
		name := filepath.Base(f)
		if f == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			vals := map[string]any{}
			if f != "" {
				var err error
				if vals, err = readValues(f); err != nil {
					t.Fatal(err)
				}
			}
			files, _, err := render(c, vals)
			if err != nil {
				t.Fatal(err)
			}
			o := decode(t, files)
			if o.deployment == nil {
				t.Skip("no pod in this mode")
			}
			if v := podSecurity(t, o.deployment.Spec.Template, api.LevelRestricted); len(v) > 0 {
				t.Errorf("PodSecurity restricted: %q", v)
			}
		})
	}
	vals, err := readValues(filepath.Join(chartDir, "ci", "tls-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals["worker"].(map[string]any)["securityContext"] = map[string]any{"runAsNonRoot": false}
	files, _, err := render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	spec := decode(t, files).deployment.Spec.Template
	if v := podSecurity(t, spec, api.LevelRestricted); len(v) != 1 {
		t.Errorf("a worker with runAsNonRoot: false: restricted violations %q, want one", v)
	}
	if v := podSecurity(t, spec, api.LevelBaseline); len(v) != 0 {
		t.Errorf("a worker with runAsNonRoot: false breaks baseline: %q", v)
	}
}

func readValues(f string) (map[string]any, error) {
	return chartutil.ReadValuesFile(f)
}
