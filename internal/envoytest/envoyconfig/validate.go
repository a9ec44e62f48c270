package envoyconfig

import (
	"bytes"
	"fmt"
	"os/exec"
)

// Validate runs `envoy --mode validate` on a bootstrap file in directory dir
// (relative module paths are resolved from there), with extra arguments
// (e.g. --config-yaml), and returns its output on failure.
func Validate(bin, dir, config string, extra ...string) error {
	args := append([]string{"--mode", "validate", "-c", config, "--disable-hot-restart", "-l", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("envoy --mode validate -c %s: %v\n%s", config, err, out)
	}
	if !bytes.Contains(out, []byte("OK")) {
		return fmt.Errorf("envoy --mode validate -c %s: no OK in output\n%s", config, out)
	}
	return nil
}
