package v1alpha1

// IPOnly reports whether the policy can guard a TCP address: every rule is
// an ip rule for all requests (a connection has no path or method, and
// nobody to log in). The AccessPolicy controller reports TCPNeedsIPRules
// on the policy and the agent on the tcp Tunnel when it is not.
func (s *AccessPolicySpec) IPOnly() bool {
	for _, r := range s.Rules {
		if r.IP == nil || len(r.PathPrefixes) > 0 || len(r.Methods) > 0 {
			return false
		}
	}
	return true
}
