package certs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"

	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// ACME orders certificates with golang.org/x/crypto/acme's client directly
// (not autocert, which keeps every certificate in memory for good and its
// challenges in one process): the account key, the challenges' answers
// and the certificates are in the shared store, so the node that orders
// and the node the CA reaches need not be the same.
type ACME struct {
	// DirectoryURL is the CA's ACME directory.
	DirectoryURL string
	Email        string
	// HTTPClient talks to the CA (default: http.DefaultClient).
	HTTPClient *http.Client
	// Challenges are the challenge types to answer, in order of
	// preference (default: tls-alpn-01, then http-01).
	Challenges []string
	// OrderTimeout bounds one order (default 5 minutes).
	OrderTimeout time.Duration

	m      *Manager
	mu     sync.Mutex
	client *acme.Client
}

const (
	challengeHTTP = "http-01"
	challengeALPN = "tls-alpn-01"
	// claimFor bounds how long another node waits on an order it did not
	// place before placing its own: a node that died while ordering.
	claimFor = 10 * time.Minute
	// orderRetry is the first wait after a failed order.
	orderRetry = time.Minute
)

// HTTPHandler answers the CA's HTTP-01 requests from the shared store and
// passes every other request to next.
func (m *Manager) HTTPHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.URL.Path, "/.well-known/acme-challenge/")
		if !ok || m.cfg.ACME == nil {
			next.ServeHTTP(w, r)
			return
		}
		host := strings.ToLower(r.Host)
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		// Only hosts the edge serves reach the store: a client cannot make
		// it read for random names.
		if !validToken(token) || m.cfg.HostPolicy(r.Context(), host) != nil {
			http.Error(w, "no such challenge", http.StatusNotFound)
			return
		}
		ka, err := m.cfg.Store.ACMEValue("http-01/" + token)
		if err != nil {
			http.Error(w, "no such challenge", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(ka)
	})
}

// validToken: ACME tokens are base64url, at least 128 bits.
func validToken(t string) bool {
	if len(t) < 22 || len(t) > 128 {
		return false
	}
	for _, c := range t {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// alpnCert is the TLS-ALPN-01 challenge certificate for host, made from the
// key authorization in the shared store.
func (a *ACME) alpnCert(host string) (*tls.Certificate, error) {
	if a.m.cfg.HostPolicy(context.Background(), host) != nil {
		return nil, fmt.Errorf("tuna-edge: no ACME challenge for %s", host)
	}
	ka, err := a.m.cfg.Store.ACMEValue("tls-alpn-01/" + host)
	if err != nil {
		return nil, fmt.Errorf("tuna-edge: no ACME challenge for %s", host)
	}
	return alpnChallengeCert(host, ka)
}

// idPeAcmeIdentifier is the TLS-ALPN-01 certificate extension (RFC 8737).
var idPeAcmeIdentifier = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 31}

func alpnChallengeCert(host string, keyAuth []byte) (*tls.Certificate, error) {
	sum := sha256.Sum256(keyAuth)
	ext, err := asn1.Marshal(sum[:])
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: idPeAcmeIdentifier, Critical: true, Value: ext}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// obtain makes sure the store holds a certificate for host: this node
// orders it unless another node's order is running, which it then waits
// for. The order runs on when ctx (the handshake) ends, so a client cut
// off finds the certificate when it retries.
func (m *Manager) obtain(ctx context.Context, host string) error {
	m.mu.Lock()
	o, running := m.orders[host]
	if !running {
		if f, ok := m.failed[host]; ok && m.cfg.Now().Before(f.retryAt) {
			m.mu.Unlock()
			return fmt.Errorf("tuna-edge: the last order of a certificate for %s failed; the next is not before %s",
				host, f.retryAt.Format(time.RFC3339))
		}
		o = &order{done: make(chan struct{})}
		m.orders[host] = o
		go func() {
			o.err = m.cfg.ACME.order(host)
			m.mu.Lock()
			delete(m.orders, host)
			if o.err != nil {
				// 1 minute, doubling up to an hour.
				f := m.failed[host]
				f.wait = min(max(2*f.wait, orderRetry), time.Hour)
				f.retryAt = m.cfg.Now().Add(f.wait)
				m.failed[host] = f
			} else {
				delete(m.failed, host)
			}
			m.mu.Unlock()
			close(o.done)
		}()
	}
	m.mu.Unlock()
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return fmt.Errorf("tuna-edge: the certificate for %s is being ordered; retry: %w", host, ctx.Err())
	}
}

// order obtains host's certificate into the store, once across the
// cluster: the node that claims the order talks to the CA; another waits
// for the certificate to appear (or the claim to lapse).
func (a *ACME) order(host string) error {
	timeout := a.OrderTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, node := a.m.cfg.Store, a.m.cfg.Node
	for {
		now := a.m.cfg.Now()
		if rec, err := st.TLSCert(host); err == nil && !renewalDue(rec.NotBefore, rec.NotAfter, now) {
			return nil
		}
		ok, held, err := st.ClaimACMEOrder(host, node, now, now.Add(claimFor))
		if err != nil {
			return err
		}
		if ok {
			break
		}
		a.m.cfg.Logger.Debug("another node orders this certificate; waiting for it", "host", host, "node", held.Node)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	defer func() { _ = st.ReleaseACMEOrder(host, node) }()
	chain, keyPEM, err := a.issue(ctx, host)
	if err != nil {
		a.m.cfg.Logger.Error("ACME: ordering a certificate failed", "host", host, "err", err)
		return fmt.Errorf("tuna-edge: ordering a certificate for %s: %w", host, err)
	}
	if err := a.m.Put(host, chain, keyPEM, true); err != nil {
		return err
	}
	a.m.cfg.Logger.Info("ACME: certificate obtained", "host", host)
	return nil
}

// issue runs one ACME order for host with a new P-256 key.
func (a *ACME) issue(ctx context.Context, host string) (chainPEM, keyPEM []byte, err error) {
	client, err := a.account(ctx)
	if err != nil {
		return nil, nil, err
	}
	o, err := client.AuthorizeOrder(ctx, acme.DomainIDs(host))
	if err != nil {
		return nil, nil, err
	}
	for _, zurl := range o.AuthzURLs {
		if err := a.authorize(ctx, client, zurl, host); err != nil {
			return nil, nil, err
		}
	}
	if o, err = client.WaitOrder(ctx, o.URI); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
	}, key)
	if err != nil {
		return nil, nil, err
	}
	ders, _, err := client.CreateCertFromOrder(ctx, o, csr, true)
	if err != nil {
		return nil, nil, err
	}
	for _, der := range ders {
		chainPEM = append(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return chainPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// authorize answers one authorization's challenge through the store, where
// every node finds it.
func (a *ACME) authorize(ctx context.Context, client *acme.Client, zurl, host string) error {
	z, err := client.GetAuthorization(ctx, zurl)
	if err != nil {
		return err
	}
	if z.Status == acme.StatusValid {
		return nil
	}
	prefs := a.Challenges
	if len(prefs) == 0 {
		prefs = []string{challengeALPN, challengeHTTP}
	}
	var chal *acme.Challenge
	for _, p := range prefs {
		if i := slices.IndexFunc(z.Challenges, func(c *acme.Challenge) bool { return c.Type == p }); i >= 0 {
			chal = z.Challenges[i]
			break
		}
	}
	if chal == nil {
		return fmt.Errorf("the CA offers no challenge of the types %v", prefs)
	}
	ka, err := client.HTTP01ChallengeResponse(chal.Token) // the key authorization, whatever the type
	if err != nil {
		return err
	}
	key := "http-01/" + chal.Token
	if chal.Type == challengeALPN {
		key = "tls-alpn-01/" + host
	}
	if err := a.m.cfg.Store.PutACMEValue(key, []byte(ka), false); err != nil {
		return err
	}
	defer func() { _ = a.m.cfg.Store.DeleteACMEValue(key) }()
	if _, err := client.Accept(ctx, chal); err != nil {
		return err
	}
	_, err = client.WaitAuthorization(ctx, z.URI)
	return err
}

// account is the ACME client under the cluster's one account key, made by
// the first node that needs it and sealed in the store.
func (a *ACME) account(ctx context.Context) (*acme.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil {
		return a.client, nil
	}
	key, err := a.accountKey()
	if err != nil {
		return nil, err
	}
	c := &acme.Client{Key: key, DirectoryURL: a.DirectoryURL, HTTPClient: a.HTTPClient, UserAgent: "tuna-edge"}
	acct := &acme.Account{}
	if a.Email != "" {
		acct.Contact = []string{"mailto:" + a.Email}
	}
	if _, err := c.Register(ctx, acct, acme.AcceptTOS); err != nil && !errors.Is(err, acme.ErrAccountAlreadyExists) {
		return nil, fmt.Errorf("registering the ACME account: %w", err)
	}
	a.client = c
	return c, nil
}

func (a *ACME) accountKey() (crypto.Signer, error) {
	seal := a.m.cfg.Seal
	st := a.m.cfg.Store
	for range 2 {
		raw, err := st.ACMEValue(store.ACMEAccountKey)
		if err == nil {
			var s store.Sealed
			if err := jsonUnmarshal(raw, &s); err != nil {
				return nil, err
			}
			der, err := seal.Open(store.ACMEAccountSealName, s.KeyID, s.Nonce, s.Data)
			if err != nil {
				return nil, fmt.Errorf("opening the ACME account key: %w", err)
			}
			return x509.ParseECPrivateKey(der)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		var s store.Sealed
		if s.KeyID, s.Nonce, s.Data, err = seal.Seal(store.ACMEAccountSealName, der); err != nil {
			return nil, err
		}
		raw, _ = jsonMarshal(s)
		// The first node's key wins; the loser reads it.
		if err := st.PutACMEValue(store.ACMEAccountKey, raw, true); err == nil {
			return key, nil
		} else if !errors.Is(err, store.ErrExists) {
			return nil, err
		}
	}
	return nil, errors.New("the ACME account key could not be read or made")
}
