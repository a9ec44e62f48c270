package envoy

// Pid returns the Envoy process's id, for tests that read its resource use
// from /proc (tests/envoybench reads its CPU time).
func (p *Process) Pid() int { return p.cmd.Process.Pid }
