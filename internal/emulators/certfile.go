package emulators

// CertFile returns the PEM file of the self-signed certificate an Azurite
// started by StartAzuriteOAuth serves, for clients in other processes
// (Go reads extra roots from SSL_CERT_FILE); "" for a plain-HTTP Azurite.
func (a *Azurite) CertFile() string {
	if a.tls == nil {
		return ""
	}
	return a.tls.certFile
}
