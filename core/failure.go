package core

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Failure says why an attempt brought no answer, or why its answer's body
// broke off: what an on-call engineer asks first (docs/deadlines.md#status-codes,
// docs/operations.md#a-requests-story-from-its-id).
type Failure string

// The failures, as the log line and the error document's attempts write
// them in their "cause" field.
const (
	FailureDNS     Failure = "dns"     // the host's name did not resolve
	FailureRefused Failure = "refused" // nothing listens on the port (ECONNREFUSED)
	FailureTLS     Failure = "tls"     // the TLS handshake failed: a plain port, a certificate, an alert
	FailureReset   Failure = "reset"   // the backend closed or reset the connection (ECONNRESET, EPIPE, EOF)
	FailureTimeout Failure = "timeout" // a deadline cut it (the attempt's Cause says which)
	FailureOther   Failure = "other"   // anything else; the gateway's own error is in the line's err
)

// Phase says how far an attempt got when it failed or was cut.
type Phase string

// The phases of an attempt.
const (
	PhaseConnect Phase = "connect" // no connection yet: resolving, dialing, TLS handshake
	PhaseHeaders Phase = "headers" // connected: sending the request, waiting for the answer's headers
	PhaseBody    Phase = "body"    // the headers came: reading the answer's body
)

// classify returns the Failure of err, an error of an attempt's round trip
// or of its answer's body, by its type: the resolver's *net.DNSError, the
// errno of the dial or the read, the errors of crypto/tls and crypto/x509,
// a net.Error that timed out.
func classify(err error) Failure {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &dns):
		if dns.IsTimeout {
			return FailureTimeout
		}
		return FailureDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailureRefused
	case isTLSError(err):
		return FailureTLS
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return FailureReset
	case errors.As(err, &ne) && ne.Timeout():
		return FailureTimeout
	}
	return FailureOther
}

// isTLSError reports whether err comes from a TLS handshake: a first
// record that is not TLS (a plain-HTTP port), an alert from the peer, a
// certificate the gateway does not accept.
func isTLSError(err error) bool {
	var rh tls.RecordHeaderError
	var alert tls.AlertError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var op *net.OpError
	return errors.As(err, &rh) || errors.As(err, &alert) || errors.As(err, &cv) || errors.As(err, &ua) ||
		errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &op) && op.Op == "remote error"
}

// CutInBody marks a the attempt whose answer's body broke off with err:
// the gateway's idle or execution limit (ErrIdleTimeout,
// ErrFunctionLimit), or the backend's connection.
func (a *Attempt) CutInBody(err error) {
	a.Phase = PhaseBody
	if errors.Is(err, ErrIdleTimeout) || errors.Is(err, ErrFunctionLimit) {
		a.Failure = FailureTimeout
		return
	}
	a.Failure = classify(err)
}
