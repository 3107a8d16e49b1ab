package pubhost

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AccessClaim is one Ingress's or HTTPRoute's attachment of an access
// policy (by name, of the object's namespace) to a published host.
type AccessClaim struct {
	Obj    client.Object
	Kind   string
	Policy string
}

// AccessVerdict is what became of a claim: Refusal is "" when the claim's
// policy guards the host, else why it does not. Overridden marks a claim
// that the host's Domain overrides: the edge applies the Domain's policy,
// so only the edge's state (not the agent) knows it.
type AccessVerdict struct {
	AccessClaim
	Refusal    string
	Overridden bool
}

// AccessInForce decides which access policy guards a published host: the
// one its owner namespace attaches, by its oldest Ingress or HTTPRoute
// that attaches one (claims of the same policy agree). Another
// namespace's claim, or a second policy of the owner's, is refused. owner
// "" (not named yet) takes none. domainPolicy, when not "", is the policy
// the host's Domain attaches: the edge applies it whatever the bind asks,
// so a claim of another policy is overridden. The agent, which enforces,
// and the AccessPolicy controller, which reports, both decide here.
// claims are taken in any order; verdicts come oldest first.
func AccessInForce(host, owner, domainPolicy string, claims []AccessClaim) (policy string, verdicts []AccessVerdict) {
	objs := make([]client.Object, len(claims))
	byObj := make(map[client.Object]AccessClaim, len(claims))
	for i, c := range claims {
		objs[i] = c.Obj
		byObj[c.Obj] = c
	}
	SortOldestFirst(objs)
	chosen := ""
	for _, o := range objs {
		c := byObj[o]
		v := AccessVerdict{AccessClaim: c}
		switch {
		case owner == "":
			v.Refusal = fmt.Sprintf("access policy %s is not attached to host %s yet: waiting for the controller to name the host's owner namespace", c.Policy, host)
		case o.GetNamespace() != owner:
			v.Refusal = fmt.Sprintf("access policy %s is not attached to host %s: only the host's owner namespace %s may attach one", c.Policy, host, owner)
		case chosen != "" && c.Policy != chosen:
			v.Refusal = fmt.Sprintf("access policy %s is not attached to host %s: an older Ingress or HTTPRoute of the namespace attaches %s, which guards the host", c.Policy, host, chosen)
		case domainPolicy != "" && c.Policy != domainPolicy:
			chosen = c.Policy
			v.Overridden = true
			v.Refusal = fmt.Sprintf("access policy %s does not guard host %s: the host's Domain attaches %s, which wins", c.Policy, host, domainPolicy)
		default:
			chosen = c.Policy
		}
		verdicts = append(verdicts, v)
	}
	return chosen, verdicts
}
