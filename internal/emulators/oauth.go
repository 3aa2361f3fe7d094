package emulators

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// azuriteTLS is the self-signed certificate of an Azurite started by
// StartAzuriteOAuth.
type azuriteTLS struct {
	certFile, keyFile string
	roots             *x509.CertPool
}

// newAzuriteTLS makes a self-signed certificate for loopback and the
// development account's production-style host names, in PEM files in dir.
func newAzuriteTLS(dir string) (*azuriteTLS, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "azurite test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{
			"localhost",
			AzuriteAccountName + ".blob.localhost",
			AzuriteAccountName + ".queue.localhost",
			AzuriteAccountName + ".table.localhost",
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	t := &azuriteTLS{
		certFile: filepath.Join(dir, "azurite-cert.pem"),
		keyFile:  filepath.Join(dir, "azurite-key.pem"),
		roots:    x509.NewCertPool(),
	}
	t.roots.AddCert(cert)
	if err := os.WriteFile(t.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(t.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return t, nil
}

// HTTPClient returns an HTTP client that reaches this Azurite's endpoints:
// it sends every "*.localhost" host name to 127.0.0.1 and, with
// StartAzuriteOAuth, trusts Azurite's self-signed certificate. It is an
// *http.Client, so it serves as an azcore policy.Transporter too.
func (a *Azurite) HTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	if a.tls != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: a.tls.roots, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}
}

// TokenCredential returns a credential whose tokens an Azurite started by
// StartAzuriteOAuth accepts: unsigned JWTs with a storage audience, an
// Entra ID issuer and the given object id, valid for an hour.
func (a *Azurite) TokenCredential(objectID string) azcore.TokenCredential {
	return azuriteToken{oid: objectID}
}

// azuriteTenant is the tenant id in AzuriteToken's tokens.
const azuriteTenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"

type azuriteToken struct{ oid string }

// GetToken returns a token Azurite's basic OAuth check accepts.
func (t azuriteToken) GetToken(_ context.Context, _ policy.TokenRequestOptions) (azcore.AccessToken, error) {
	now := time.Now()
	exp := now.Add(time.Hour)
	claims, err := json.Marshal(map[string]any{
		"aud": "https://storage.azure.com",
		"iss": "https://sts.windows.net/" + azuriteTenant + "/",
		"iat": now.Add(-time.Minute).Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
		"exp": exp.Unix(),
		"oid": t.oid,
		"tid": azuriteTenant,
	})
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("azurite token: %w", err)
	}
	enc := base64.RawURLEncoding
	jwt := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(claims) + "." + enc.EncodeToString([]byte("unsigned"))
	return azcore.AccessToken{Token: jwt, ExpiresOn: exp}, nil
}

// CertFile returns the PEM file of the self-signed certificate an Azurite
// started by StartAzuriteOAuth serves (for SSL_CERT_FILE of a process that
// must trust it), or "" for a plain-HTTP Azurite.
func (a *Azurite) CertFile() string {
	if a.tls == nil {
		return ""
	}
	return a.tls.certFile
}
