package admission

// AccessPolicy lists the AccessPolicy's admission rules. What only the
// edge can check (an htpasswd file of bcrypt hashes, a links key of 32
// bytes, an issuer it can reach) shows in status (Accepted=False).
var AccessPolicy = []Case{
	{Name: "public and login", Spec: `{rules: [{name: hooks, pathPrefixes: [/webhooks/], methods: [POST], public: true},
		{oidc: {issuerURL: "https://accounts.google.com", clientID: abc, clientSecretRef: {name: google}, allowedDomains: [example.com]}}]}`},
	{Name: "ip, deny, basic auth and links", Spec: `{rules: [{ip: {denyCIDRs: [198.51.100.0/24]}}, {pathPrefixes: [/internal/], deny: true},
		{basicAuth: {secretRef: {name: htpasswd}, realm: partners}}, {links: {secretRef: {name: share, key: key}}}],
		sessionLifetime: 8h, rateLimits: {perClientIP: {requests: 100, period: 1m}}, identityHeaders: false,
		requestHeaders: {set: {X-Env: prod}, remove: [X-Debug]}, responseHeaders: {remove: [Server]}, maintenance: true}`},

	{Name: "no spec", Spec: "-", Field: "spec", Message: "Required value"},
	{Name: "no rules", Spec: "{rules: []}", Field: "spec.rules", Message: "should have at least 1 items"},
	{Name: "a rule that does nothing", Spec: "{rules: [{name: x}]}", Field: "spec.rules[0]", Message: "set exactly one of public: true, deny: true, ip, oidc, basicAuth or links"},
	{Name: "a rule that does two things", Spec: "{rules: [{public: true, deny: true}]}", Field: "spec.rules[0]", Message: "set exactly one of"},
	{Name: "public false alone", Spec: "{rules: [{public: false}]}", Field: "spec.rules[0]", Message: "set exactly one of"},
	{Name: "relative path prefix", Spec: "{rules: [{pathPrefixes: [api/], public: true}]}", Field: "spec.rules[0].pathPrefixes[0]", Message: "a path prefix starts with '/'"},
	{Name: "lower-case method", Spec: "{rules: [{methods: [get], public: true}]}", Field: "spec.rules[0].methods[0]", Message: "should match"},
	{Name: "empty ip rule", Spec: "{rules: [{ip: {}}]}", Field: "spec.rules[0].ip", Message: "an ip rule needs allowCIDRs, denyCIDRs or both"},
	{Name: "not a CIDR", Spec: "{rules: [{ip: {allowCIDRs: [10.0.0.1]}}]}", Field: "spec.rules[0].ip.allowCIDRs[0]", Message: "must be a CIDR"},
	{Name: "http issuer", Spec: `{rules: [{oidc: {issuerURL: "http://idp.example.com", clientID: a, clientSecretRef: {name: s}}}]}`,
		Field: "spec.rules[0].oidc.issuerURL", Message: "issuerURL must be an https:// URL"},
	{Name: "oidc without a secret", Spec: `{rules: [{oidc: {issuerURL: "https://idp.example.com", clientID: a}}]}`,
		Field: "spec.rules[0].oidc.clientSecretRef", Message: "Required value"},
	{Name: "secret name upper case", Spec: "{rules: [{basicAuth: {secretRef: {name: Htpasswd}}}]}", Field: "spec.rules[0].basicAuth.secretRef.name", Message: "must be the name of a Secret"},
	{Name: "realm with a quote", Spec: `{rules: [{basicAuth: {secretRef: {name: h}, realm: 'a"b'}}]}`, Field: "spec.rules[0].basicAuth.realm", Message: "should match"},
	{Name: "rate limit of zero", Spec: "{rules: [{public: true}], rateLimits: {perClientIP: {requests: 0, period: 1m}}}", Field: "spec.rateLimits.perClientIP.requests", Message: "should be greater than or equal to 1"},
	// A value that is not a duration would be stored, and then every list
	// of AccessPolicies would fail to decode: admission must refuse it.
	{Name: "session lifetime not a duration", Spec: "{rules: [{public: true}], sessionLifetime: banana}", Field: "spec.sessionLifetime", Message: "must be of type duration"},
	{Name: "session lifetime too long", Spec: "{rules: [{public: true}], sessionLifetime: 1000h}", Field: "spec.sessionLifetime", Message: "sessionLifetime must be between 1s and 720h"},
	{Name: "session lifetime zero", Spec: "{rules: [{public: true}], sessionLifetime: 0s}", Field: "spec.sessionLifetime", Message: "sessionLifetime must be between 1s and 720h"},
	{Name: "rate period not a duration", Spec: "{rules: [{public: true}], rateLimits: {perIdentity: {requests: 5, period: soon}}}", Field: "spec.rateLimits.perIdentity.period", Message: "must be of type duration"},
	{Name: "rate period too long", Spec: "{rules: [{public: true}], rateLimits: {perClientIP: {requests: 5, period: 48h}}}", Field: "spec.rateLimits.perClientIP.period", Message: "period must be between 1s and 24h"},
	{Name: "rate period below a second", Spec: "{rules: [{public: true}], rateLimits: {perClientIP: {requests: 5, period: 500ms}}}", Field: "spec.rateLimits.perClientIP.period", Message: "period must be between 1s and 24h"},
	{Name: "unknown field", Spec: "{rules: [{public: true, allow: true}]}", Field: "spec.rules[0].allow", Message: "unknown field"},
}
