package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/tests/pki"
)

// compileMark is the start-up log line written just before the module is
// compiled: a flag that fails without it failed before the compile.
const compileMark = "compiling the filter module"

// Every bad flag stops the built binary before the module is compiled,
// with an error that names the flag as the operator wrote it and never a
// position in JSON the operator did not write. Values are checked with
// exit status 2, addresses that cannot be bound with 1; neither shows the
// compile in the log. A module that passes the checks but does not compile
// shows it, which proves the mark is there to be missed.
func TestBadFlagsFailBeforeCompile(t *testing.T) {
	bin, _ := artifacts(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dup := write("dup.json", `{"max_depth":5,
 "max_depth":6}`)
	notWasm := write("not.wasm", "not a module")
	badWasm := write("bad.wasm", "\x00asm\x01\x00\x00\x00\xff\xff")
	// One function type declaring 2^32-1 parameters, in 16 bytes: wazero
	// would allocate 32 GiB for them before finding the file short.
	hugeWasm := write("huge.wasm", "\x00asm\x01\x00\x00\x00\x01\x07\x01\x60\xff\xff\xff\xff\x0f")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()
	ca, err := pki.NewCA("flags CA")
	if err != nil {
		t.Fatal(err)
	}
	server, _ := ca.Server("127.0.0.1")
	other, _ := ca.Server("127.0.0.1")
	cert, key, err := server.Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, _ := other.Write(dir, "other")
	caFile, _ := ca.Write(dir, "ca")
	emptyFile := write("empty.pem", "\n")
	senders := `{"trusted_senders":[{"principal":"spiffe://cluster.local/ns/llm/sa/router"}]}`

	for _, c := range []struct {
		args    []string
		code    int
		want    []string // in stderr
		compile bool     // the log shows the compile
	}{
		{args: []string{"-max-body-bytes", "300000000"}, code: 2, want: []string{"-max-body-bytes 300000000:", "268435456"}},
		{args: []string{"-max-body-bytes", "0"}, code: 2, want: []string{"-max-body-bytes 0:"}},
		{args: []string{"-listen", "127.0.0.1:99999"}, code: 2, want: []string{`-listen "127.0.0.1:99999"`, "port"}},
		{args: []string{"-admin", "127.0.0.1:99999"}, code: 2, want: []string{`-admin "127.0.0.1:99999"`}},
		{args: []string{"-listen", "no-port"}, code: 2, want: []string{`-listen "no-port"`}},
		{args: []string{"-filter-config", `{"max_depth":5,"max_depth":6}`}, code: 2, want: []string{"-filter-config:", `duplicate member "max_depth" (at byte 15)`}},
		{args: []string{"-filter-config", "@" + dup}, code: 2, want: []string{"-filter-config @" + dup + ":", `duplicate member "max_depth" (at byte 17)`}},
		{args: []string{"-filter-config", `{"max_body_bytes":300000000}`}, code: 2, want: []string{"-filter-config:", "max_body_bytes: value out of range 1..268435456 (at byte 18)"}},
		{args: []string{"-filter-config", `{"no_such":1}`}, code: 2, want: []string{"-filter-config:", `unknown member "no_such"`}},
		{args: []string{"-filter-config", "@" + filepath.Join(dir, "missing.json")}, code: 2, want: []string{"-filter-config:", "missing.json"}},
		{args: []string{"-upstream", "ftp://x"}, code: 2, want: []string{`-upstream "ftp://x"`}},
		{args: []string{"-upstream", ""}, code: 2, want: []string{"-upstream: missing", "-upstream echo"}},
		{args: []string{"-shutdown-delay", "-1s"}, code: 2, want: []string{"-shutdown-delay -1s:"}},
		{args: []string{"-pool-size", "-1"}, code: 2, want: []string{"-pool-size -1:"}},
		{args: []string{"-idle-timeout", "-1s"}, code: 2, want: []string{"-idle-timeout -1s:"}},
		{args: []string{"-drain-timeout", "-1s"}, code: 2, want: []string{"-drain-timeout -1s:"}},
		{args: []string{"-log-flush", "-1s"}, code: 2, want: []string{"-log-flush -1s:"}},
		{args: []string{"-filter", filepath.Join(dir, "missing.wasm")}, code: 2, want: []string{"-filter:", "missing.wasm"}},
		{args: []string{"-filter", notWasm}, code: 2, want: []string{"-filter " + notWasm + ": not a WebAssembly"}},
		{args: []string{"-client-ca", caFile}, code: 2, want: []string{"-client-ca: needs -tls-cert and -tls-key"}},
		{args: []string{"-tls-cert", cert}, code: 2, want: []string{"-tls-cert: needs -tls-key"}},
		{args: []string{"-tls-key", key, "-client-ca", caFile}, code: 2, want: []string{"-tls-key: needs -tls-cert"}},
		{args: []string{"-tls-cert", filepath.Join(dir, "missing.crt"), "-tls-key", key}, code: 2, want: []string{"-tls-cert:", "missing.crt", "no such file"}},
		{args: []string{"-tls-cert", cert, "-tls-key", filepath.Join(dir, "missing.key")}, code: 2, want: []string{"-tls-key:", "missing.key"}},
		{args: []string{"-tls-cert", key, "-tls-key", key}, code: 2, want: []string{"-tls-cert " + key + `: PEM block 1 is a "PRIVATE KEY", not a CERTIFICATE`}},
		{args: []string{"-tls-cert", cert, "-tls-key", otherKey}, code: 2, want: []string{"-tls-key " + otherKey + ":", "private key does not match public key"}},
		{args: []string{"-tls-cert", cert, "-tls-key", key, "-client-ca", key}, code: 2, want: []string{"-client-ca " + key + `: PEM block 1 is a "PRIVATE KEY"`}},
		{args: []string{"-tls-cert", cert, "-tls-key", key, "-client-ca", emptyFile}, code: 2, want: []string{"-client-ca " + emptyFile + ": no certificate"}},
		{args: []string{"-tls-cert", cert, "-tls-key", key, "-client-ca", filepath.Join(dir, "missing-ca.crt")}, code: 2, want: []string{"-client-ca:", "missing-ca.crt"}},
		{args: []string{"-filter-config", senders, "-trust-kv-hints"}, code: 2, want: []string{"-trust-kv-hints: cannot be combined with trusted_senders"}},
		{args: []string{"-listen", inUse}, code: 1, want: []string{"-listen " + inUse + ":", "address already in use"}},
		{args: []string{"-admin", inUse}, code: 1, want: []string{"-admin " + inUse + ":", "address already in use"}},
		{args: []string{"-filter", badWasm}, code: 1, want: []string{"-filter " + badWasm + ":"}, compile: true},
		{args: []string{"-filter", hugeWasm}, code: 1, want: []string{"-filter " + hugeWasm + ":", "the filter module is malformed: section 1 (type): 4294967295 parameters declared; 0 bytes are left"}, compile: true},
	} {
		listen, admin := freeAddrPair(t)
		args := append([]string{"-listen", listen, "-admin", admin, "-cache-dir", testCache(t), "-log-flush", "0", "-upstream", "echo"}, c.args...)
		// A guard against a binary that starts serving instead of failing.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		code := -1
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		out := stderr.String()
		if code != c.code {
			t.Errorf("%q: exit %d (%v), want %d: %s", c.args, code, err, c.code, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: stderr does not say %q: %s", c.args, w, out)
			}
		}
		if strings.Contains(out, compileMark) != c.compile {
			t.Errorf("%q: compile in the log = %v, want %v: %s", c.args, !c.compile, c.compile, out)
		}
	}
}
