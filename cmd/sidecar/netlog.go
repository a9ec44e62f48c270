package main

import (
	stdlog "log"
	"log/slog"
	"strings"
)

// net/http reports some trouble through a *log.Logger: the transport
// through the standard log package's default logger, the server and
// ReverseProxy through their ErrorLog. Those lines can quote what a peer
// sent: the transport's "Unsolicited response received on idle HTTP
// channel starting with %q" quotes the worker's bytes, body included, and
// the sidecar never logs bodies. netLog turns each line into a slog record
// with a fixed message and no quoted bytes.

// netLog is an io.Writer for a *log.Logger (without flags or prefix): one
// Write per line.
type netLog struct {
	log    *slog.Logger
	source string // "transport", "server" or "proxy"
}

// unsolicited starts the transport's line about bytes from the worker on
// an idle connection; the connection is closed and the bytes are dropped.
const unsolicited = "Unsolicited response received on idle HTTP channel"

func (n netLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.HasPrefix(line, unsolicited):
		n.log.Warn("the worker sent bytes on an idle connection; it was closed and the bytes dropped (not logged)", "source", n.source)
	case strings.HasPrefix(line, "http: panic serving"):
		n.log.Error("net/http error", "source", n.source, "detail", redactQuoted(line))
	default:
		n.log.Warn("net/http error", "source", n.source, "detail", redactQuoted(line))
	}
	return len(p), nil
}

// newNetLogger is a *log.Logger that writes through netLog.
func newNetLogger(l *slog.Logger, source string) *stdlog.Logger {
	return stdlog.New(netLog{l, source}, "", 0)
}

// routeStdLog sends the standard log package's default logger, which
// net/http's transport writes to, through l.
func routeStdLog(l *slog.Logger) {
	stdlog.SetFlags(0)
	stdlog.SetPrefix("")
	stdlog.SetOutput(netLog{l, "transport"})
}

// redactQuoted replaces each double-quoted string in s (as %q writes it,
// escapes included) with `"…"`: net/http quotes what peers sent.
// An unterminated quote hides the rest of s.
func redactQuoted(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(`"…"`)
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return b.String()
		}
		s = s[j+1:]
	}
}
