package host

// RequestProperty answers a property of r as the host answers the guest
// (for the external tests, which check a runner supplies what it means to).
func RequestProperty(r *Request, key string) ([]byte, bool) {
	return (*requestProps)(r).Property(key)
}
