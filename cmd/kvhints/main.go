// Command kvhints lets producers and operators ask the kvgate rulebook
// (package kvhints) what it would do with a KV hint envelope or a request
// body, without running a proxy.
//
// Usage:
//
//	kvhints check   [--max-depth N] FILE|-
//	kvhints rewrite [--trusted] [--max-depth N] [--max-body-bytes N] [--router-only JSON] FILE|-
//	kvhints plan    ...
//	kvhints help
//	kvhints -version
//
// check admits one envelope (the value of a kv_hints member) and prints one
// JSON line on stdout. rewrite filters one request body the way the proxy
// would, writes the body that would be forwarded to stdout and one JSON
// outcome line on stderr. Run "kvhints help" or "kvhints SUBCOMMAND -h" for
// the details of each output and of the exit codes.
//
// Hint contents never reach stderr: the only things written there are the
// outcome line of rewrite, usage text and error messages that name files,
// flags and sizes, never the input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/internal/version"
)

// Exit codes shared by every subcommand.
const (
	exitOK       = 0 // admitted / forwarded
	exitRejected = 1 // ignored / rejected
	exitUsage    = 2 // bad arguments or an input that could not be read
)

const usage = `kvhints: what kvgate's rulebook does with KV hints.

Usage:
  kvhints check   [--max-depth N] FILE|-
  kvhints rewrite [--trusted] [--max-depth N] [--max-body-bytes N] [--router-only JSON] FILE|-
  kvhints plan    (see "kvhints plan -h")
  kvhints help
  kvhints -version

FILE "-" reads standard input.

check admits one kv_hints envelope and prints one JSON line on stdout:
  {"admitted":bool,"reason":"..."|null,"compact_bytes":N|null}
  and, when ignored, "path" and "detail": where the fault is and what it is.
  exit 0 admitted, 1 ignored, 2 usage or I/O error.

rewrite filters one request body, writes the body that would be forwarded
to stdout (nothing when rejected) and one JSON line on stderr:
  {"outcome":"...","reason":"..."|null,"status":N}
  exit 0 forwarded, 1 rejected (status 400 or 413), 2 usage or I/O error.

Run "kvhints check -h" or "kvhints rewrite -h" for the details.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a subcommand and
// returns the process exit code. It is main without the process, so tests
// call it in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "check":
		return runCheck(args[1:], stdin, stdout, stderr)
	case "rewrite":
		return runRewrite(args[1:], stdin, stdout, stderr)
	case "plan":
		return runPlan(args[1:], stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.Get().Line("kvhints"))
		return exitOK
	}
	fmt.Fprintf(stderr, "kvhints: unknown subcommand %q\n\n%s", args[0], usage)
	return exitUsage
}

// parseArgs parses fs over args, allowing flags both before and after the
// one positional FILE|- argument, and returns that argument; "--" ends the
// flags. On any error it has printed a message and the usage: help (-h) to
// stdout with exitOK, anything else to stderr with exitUsage.
func parseArgs(fs *flag.FlagSet, text string, args []string, stdout, stderr io.Writer) (file string, code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, on the right stream
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, text)
				return "", exitOK, false
			}
			fmt.Fprint(stderr, usageHint(fs.Name(), text))
			return "", exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// flag stops at "--" as well as at the first non-flag; after "--"
		// everything is positional.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "%s: expected exactly one FILE or -, got %d\n%s", fs.Name(), len(pos), usageHint(fs.Name(), text))
		return "", exitUsage, false
	}
	return pos[0], 0, true
}

// usageHint is the short usage printed after an argument error: the first
// line of the subcommand's help and where to find the rest.
func usageHint(name, text string) string {
	first, _, _ := strings.Cut(text, "\n")
	return first + "\nRun \"kvhints " + name + " -h\" for details.\n"
}

// readInput reads all of FILE, or standard input for "-". When limit is
// positive it reads at most limit+1 bytes: enough for the caller to see that
// the input is over the limit without buffering all of it.
func readInput(name string, stdin io.Reader, limit int) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	if limit > 0 {
		r = io.LimitReader(r, int64(limit)+1)
	}
	return io.ReadAll(r)
}

// intFlag is a flag.Value for an int that must be at least min.
type intFlag struct {
	v   *int
	min int
}

func (f intFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < f.min {
		return fmt.Errorf("must be at least %d", f.min)
	}
	*f.v = n
	return nil
}
