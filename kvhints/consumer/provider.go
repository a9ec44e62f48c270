package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/kvhints"
)

// Dialer opens connections on behalf of a provider. *net.Dialer satisfies
// it; tests use a recording one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// FetchHint is the final, immutable backend hint the orchestration hands
// to a provider: the binding that was resolved and the one-action
// envelope of the selected candidate, forwarded unchanged. It carries no
// pre-approved address: the provider reads the destination from the
// envelope and decides about it itself.
type FetchHint struct {
	// Binding is the name of the resolved binding.
	Binding string
	// Family is the binding's family.
	Family Family
	// Envelope is the one-action envelope of the selected candidate.
	Envelope *kvhints.Snapshot
}

// ErrRejected is wrapped by every provider error that refuses a hint
// before any connection or submission started.
var ErrRejected = errors.New("provider rejected the hint")

// Provider performs a named fetch.
//
// A provider must not rely on the orchestration's approval: Validate and
// Fetch both check the action version, the payload and the destination on
// the provider's own terms, and refuse with an error wrapping ErrRejected
// before any connection or SDK work starts. A supplied address never
// grants permission to contact it.
type Provider interface {
	// Validate checks h without connecting or submitting anything.
	Validate(h FetchHint) error
	// Fetch checks h again, then connects and transfers. An error that
	// wraps ErrRejected means nothing was started.
	Fetch(ctx context.Context, h FetchHint) error
}

// TransferFunc moves the KV named by p over an open connection.
type TransferFunc func(ctx context.Context, conn net.Conn, p FetchPayload) error

// FetchProvider is a Provider for kv.fetch 1.0 over tcp:// endpoints. It
// keeps its own allowlist, separate from the orchestration's registry
// (they may hold the same entries; they are checked independently).
type FetchProvider struct {
	allow    Registry
	dialer   Dialer
	transfer TransferFunc

	// skipValidation turns the provider's own checks off. Only tests set
	// it, to show that the orchestration's registry check blocks alone.
	skipValidation bool
}

// NewFetchProvider returns a provider that accepts only endpoints allow
// lists, connects through d, and runs transfer on the connection (a nil
// transfer only connects).
func NewFetchProvider(allow Registry, d Dialer, transfer TransferFunc) *FetchProvider {
	return &FetchProvider{allow: allow, dialer: d, transfer: transfer}
}

// Validate checks that h holds exactly one kv.fetch 1.0 action with a valid
// payload, and that its endpoint is a tcp://host:port address on the
// provider's allowlist.
func (p *FetchProvider) Validate(h FetchHint) error {
	if p.skipValidation {
		return nil
	}
	_, _, err := p.check(h)
	return err
}

func (p *FetchProvider) check(h FetchHint) (FetchPayload, string, error) {
	if h.Envelope == nil || h.Envelope.NumActions() != 1 {
		return FetchPayload{}, "", fmt.Errorf("%w: not a one-action envelope", ErrRejected)
	}
	a := h.Envelope.Action(0)
	if a.Type() != fetchType || a.Version() != fetchVersion {
		return FetchPayload{}, "", fmt.Errorf("%w: action is not %s %s", ErrRejected, fetchType, fetchVersion)
	}
	pl, err := ParseFetchPayload(a.Payload())
	if err != nil {
		return FetchPayload{}, "", fmt.Errorf("%w: %v", ErrRejected, err)
	}
	addr, err := tcpAddress(pl.SourceControlEndpoint)
	if err != nil {
		return FetchPayload{}, "", fmt.Errorf("%w: %v", ErrRejected, err)
	}
	if p.allow == nil || !p.allow.Allows(pl.SourceControlEndpoint) {
		return FetchPayload{}, "", fmt.Errorf("%w: endpoint is not on the provider's allowlist", ErrRejected)
	}
	return pl, addr, nil
}

// Fetch validates h, then dials the endpoint and runs the transfer.
func (p *FetchProvider) Fetch(ctx context.Context, h FetchHint) error {
	var (
		pl   FetchPayload
		addr string
		err  error
	)
	if p.skipValidation {
		pl, addr, err = p.unchecked(h)
	} else {
		pl, addr, err = p.check(h)
	}
	if err != nil {
		return err
	}
	if p.dialer == nil {
		return fmt.Errorf("%w: no dialer configured", ErrRejected)
	}
	conn, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("kv.fetch: connect to binding %s: %w", h.Binding, err)
	}
	defer conn.Close()
	if p.transfer == nil {
		return nil
	}
	return p.transfer(ctx, conn, pl)
}

// unchecked derives the address without any policy check (tests only).
func (p *FetchProvider) unchecked(h FetchHint) (FetchPayload, string, error) {
	if h.Envelope == nil || h.Envelope.NumActions() != 1 {
		return FetchPayload{}, "", fmt.Errorf("%w: not a one-action envelope", ErrRejected)
	}
	pl, err := ParseFetchPayload(h.Envelope.Action(0).Payload())
	if err != nil {
		return FetchPayload{}, "", fmt.Errorf("%w: %v", ErrRejected, err)
	}
	addr, err := tcpAddress(pl.SourceControlEndpoint)
	if err != nil {
		return FetchPayload{}, "", fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return pl, addr, nil
}

// tcpAddress turns "tcp://host:port" into "host:port", refusing anything
// else (other schemes, user info, paths, queries, a port outside 1..65535).
func tcpAddress(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", errors.New("endpoint is not a tcp:// address")
	}
	if strings.ContainsAny(rest, "/?#@ \\") {
		return "", errors.New("endpoint has more than host and port")
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil || host == "" {
		return "", errors.New("endpoint has no host and port")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || port[0] == '0' {
		return "", errors.New("endpoint port is not in 1..65535")
	}
	return rest, nil
}
