package core

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A route is a capability the operator grants (docs/security.md#signed-routes-a-capability-the-operator-grants): the client
// may ask of its backends only what the route allows, and never widen it.
// A route with auth calls its backends with the function's own identity,
// so the gateway is a deputy there: a client header such as
// X-Amz-Copy-Source, or a query parameter such as ?delete, would turn the
// function's credential to an operation or a target the route never names.
// Admit is the one place that decides; docs/security.md ("Signed routes: a
// capability the operator grants") states the rule and where each cloud
// documents the headers and parameters that select an operation.
//
//   - Methods: a route's "methods", or GET and HEAD on a route with auth,
//     or every method. Another is 405 MethodNotAllowed with an Allow header.
//     On a route with fewer than every method, the method-override headers
//     (methodOverrideHeaders) are refused: some servers take the method
//     from them.
//   - On a route with auth, a client header in a cloud's control namespace
//     (x-amz-*, x-ms-*, also spelt with "_") is refused, 400
//     HeaderNotAllowed, unless the service's rule passes it (serviceRule)
//     or the route's "allowHeaders" names it. The SigV4 headers the
//     gateway replaces (X-Amz-Date, X-Amz-Security-Token,
//     X-Amz-Content-Sha256) are removed rather than refused.
//   - On a route with auth, the header that carries the caller's own
//     Authorization (clientAuthorizationHeader) is refused: only the
//     gateway sets it, so the backend can trust it.
//   - On a route with auth, every query parameter is refused, 400
//     QueryNotAllowed, unless the service's rule passes it or the route's
//     "allowQuery" names it ("name" for any value, "name=value" for that
//     value only). A parameter name written with an escape ('%', '+') and
//     a query with ';' are refused: no two parsers can then disagree on
//     what was checked.

// methodOverrideHeaders are the headers some servers and frameworks take
// the request's method from instead of its request line.
var methodOverrideHeaders = []string{"x-http-method-override", "x-http-method", "x-method-override"}

// guardedPrefixes are the control namespaces of the clouds' services: the
// headers there select operations, sources, ACLs and keys.
var guardedPrefixes = []string{"x-amz-", "x-ms-"}

// serviceRule is what a signed service lets through without the route
// naming it: headers of a guarded namespace and query parameters that only
// shape a read's answer or a request's bookkeeping, never its operation or
// target. Every other guarded header and every other query parameter needs
// the route to name it.
type serviceRule struct {
	name    string   // for messages, such as "sigv4 for s3"
	headers []string // lower case
	query   []string
}

var (
	// ruleS3: GetObject's response-* parameters override the answer's
	// headers only (S3 API reference, GetObject, "Overriding response
	// header values"). Every subresource (?acl, ?delete, ?policy,
	// ?uploads, ?tagging, ?versionId, …) and every x-amz-* header
	// (x-amz-copy-source, x-amz-acl, x-amz-grant-*, …) needs the route.
	ruleS3 = serviceRule{name: "sigv4 for s3", query: []string{
		"response-cache-control", "response-content-disposition", "response-content-encoding",
		"response-content-language", "response-content-type", "response-expires",
	}}
	// ruleAzureStorage: a request authorized with Entra ID must carry
	// x-ms-version (Azure Storage REST, "Authorize with Microsoft Entra
	// ID"); x-ms-date and x-ms-client-request-id are bookkeeping, x-ms-range
	// a read's range, timeout the server's own time limit. comp, restype
	// (which select the operation: ?comp=copy, ?restype=service&
	// comp=userdelegationkey), x-ms-copy-source and the rest need the
	// route.
	ruleAzureStorage = serviceRule{name: "entra for Azure Storage",
		headers: []string{"x-ms-version", "x-ms-date", "x-ms-client-request-id", "x-ms-range"},
		query:   []string{"timeout"}}
)

// rule returns the service rule of a route's auth: S3, Azure Storage, or
// for any other service an empty rule, so that the route names what passes.
func (a *BackendAuth) rule() serviceRule {
	switch a.Type {
	case AuthSigV4:
		if a.Service == "s3" {
			return ruleS3
		}
		return serviceRule{name: "sigv4 for " + a.Service}
	case AuthEntra:
		if azureStorageScope(a.Scope) {
			return ruleAzureStorage
		}
	}
	return serviceRule{name: a.Type + " for " + strconv.Quote(a.Scope)}
}

// azureStorageScope reports whether scope is a token scope of Azure
// Storage: the service-wide https://storage.azure.com/.default, or one
// account's blob, queue, table, file or dfs endpoint.
func azureStorageScope(scope string) bool {
	u, err := url.Parse(strings.TrimSuffix(scope, "/.default"))
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if host == "storage.azure.com" {
		return true
	}
	labels := strings.Split(host, ".")
	if len(labels) < 4 {
		return false
	}
	switch labels[1] {
	case "blob", "queue", "table", "file", "dfs":
		return labels[2] == "core"
	}
	return false
}

// NotAllowedError is the cause (Error.Err) of a request a route refused
// before any attempt: a method (ReasonMethodNotAllowed), headers
// (ReasonHeaderNotAllowed) or query parameters (ReasonQueryNotAllowed) it
// does not allow.
type NotAllowedError struct {
	// Names are what was refused, as the client wrote them: the method,
	// header names, or query parameters ("name" or "name=value").
	Names []string
	// Allow, for a method, is the methods the route allows: the Allow
	// header of the 405.
	Allow []string
}

func (e *NotAllowedError) Error() string { return "not allowed: " + strings.Join(e.Names, ", ") }

// AllowedMethods returns the methods r allows, or nil for every method.
func (r *Route) AllowedMethods() []string {
	if r.Methods != nil {
		return r.Methods
	}
	if r.Auth != nil {
		return defaultSignedMethods
	}
	return nil
}

// defaultSignedMethods are the methods of a route with auth whose
// "methods" is unset: reads.
var defaultSignedMethods = []string{http.MethodGet, http.MethodHead}

// Admit decides whether r lets a client send method, header and rawQuery
// to its backends (see the rule above), before any attempt. It returns nil
// or an *Error with ReasonMethodNotAllowed, ReasonHeaderNotAllowed or
// ReasonQueryNotAllowed whose message names what was refused, with a
// *NotAllowedError as its Err. It never modifies header. A route without
// auth and without methods admits everything at once.
func (r *Route) Admit(method string, header http.Header, rawQuery string) *Error {
	allow := r.AllowedMethods()
	if allow == nil {
		return nil
	}
	if !slices.Contains(allow, method) {
		return &Error{Reason: ReasonMethodNotAllowed,
			Message: "method " + strconv.Quote(trimText(method)) + ": this route allows " + strings.Join(allow, ", "),
			Err:     &NotAllowedError{Names: []string{method}, Allow: allow}}
	}
	var refused []string
	why := ""
	var rule serviceRule
	if r.Auth != nil {
		rule = r.Auth.rule()
	}
	for k := range header {
		n := HeaderKey(k)
		switch {
		case slices.Contains(methodOverrideHeaders, n):
			refused = append(refused, k)
			why = "it would change the method, and this route allows " + strings.Join(allow, ", ")
		case r.Auth == nil:
		case r.Auth.ClientAuthorizationHeader != "" && n == HeaderKey(r.Auth.ClientAuthorizationHeader):
			refused = append(refused, k)
			why = "the gateway sets it on this route, to the caller's own Authorization; a client cannot"
		case r.Auth.Type == AuthSigV4 && slices.Contains(sigV4Replaced, k):
			// Removed by authHeaders; the signature sets its own.
		case guarded(n) && !r.allowsHeader(n, rule):
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 {
		if r.Auth != nil && (why == "" || len(refused) > 1) {
			why = "a route with auth (" + rule.name + ") passes x-amz-* and x-ms-* headers only when its allowHeaders names them"
		}
		return notAllowed(ReasonHeaderNotAllowed, "header", refused, why)
	}
	if r.Auth == nil || rawQuery == "" {
		return nil
	}
	return r.admitQuery(rawQuery, rule)
}

// admitQuery checks the query parameters of a request to a route with
// auth.
func (r *Route) admitQuery(rawQuery string, rule serviceRule) *Error {
	if strings.Contains(rawQuery, ";") {
		return notAllowed(ReasonQueryNotAllowed, "query separator", []string{";"},
			"a route with auth takes only '&' between query parameters; write a ';' in a value as %3B")
	}
	var refused []string
	why := ""
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		name, rawValue, hasValue := strings.Cut(part, "=")
		if name == "" || strings.ContainsAny(name, "%+") {
			refused = append(refused, part)
			why = "a route with auth takes query parameter names only as plain text, without escapes"
			continue
		}
		if slices.Contains(rule.query, name) {
			continue
		}
		ok, only := r.allowsQuery(name, rawValue, hasValue)
		if ok {
			continue
		}
		if only != "" {
			refused = append(refused, part)
			why = "this route allows " + name + " only as " + only
			continue
		}
		refused = append(refused, name)
	}
	if len(refused) == 0 {
		return nil
	}
	if why == "" || len(refused) > 1 {
		why = "a route with auth (" + rule.name + ") passes query parameters only when its allowQuery names them"
	}
	return notAllowed(ReasonQueryNotAllowed, "query parameter", refused, why)
}

// allowsHeader reports whether n, a guarded header key (HeaderKey), is
// passed by the service's rule or named by the route.
func (r *Route) allowsHeader(n string, rule serviceRule) bool {
	if slices.Contains(rule.headers, n) {
		return true
	}
	for _, a := range r.AllowHeaders {
		a = HeaderKey(a)
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(n, p) {
				return true
			}
		} else if n == a {
			return true
		}
	}
	return false
}

// allowsQuery reports whether the route names the query parameter name
// with its raw value. When it names name only with other values, only
// lists them ("comp=list").
func (r *Route) allowsQuery(name, rawValue string, hasValue bool) (ok bool, only string) {
	var values []string
	for _, a := range r.AllowQuery {
		an, av, withValue := strings.Cut(a, "=")
		if an != name {
			continue
		}
		if !withValue {
			return true, ""
		}
		v, err := url.QueryUnescape(rawValue)
		if err == nil && (v == av || av == "" && !hasValue) {
			return true, ""
		}
		values = append(values, a)
	}
	return false, strings.Join(values, " or ")
}

// notAllowed builds the refusal of names (a few, quoted, in order).
func notAllowed(reason Reason, what string, names []string, why string) *Error {
	slices.Sort(names)
	names = slices.Compact(names)
	const most = 5
	quoted := make([]string, 0, min(len(names), most))
	for _, n := range names[:min(len(names), most)] {
		quoted = append(quoted, strconv.Quote(trimText(n)))
	}
	msg := what + " " + strings.Join(quoted, ", ")
	if len(names) > 1 {
		msg = what + "s " + strings.Join(quoted, ", ")
	}
	if len(names) > most {
		msg += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return &Error{Reason: reason, Message: msg + ": " + why, Err: &NotAllowedError{Names: names}}
}

// guarded reports whether n (a HeaderKey) is in a control namespace.
func guarded(n string) bool {
	for _, p := range guardedPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// parseCapability reads a route's methods, allowHeaders and allowQuery,
// after its auth.
func (r *Route) parseCapability(rj *routeJSON) error {
	if rj.Methods != nil {
		if len(rj.Methods) == 0 {
			return errors.New("methods []: want at least one method, such as [\"GET\",\"HEAD\"]; leave methods out for the default")
		}
		for i, m := range rj.Methods {
			if !methodName(m) {
				return fmt.Errorf("methods %q: want upper-case method names (methods are case-sensitive), such as GET, HEAD, PUT", m)
			}
			if slices.Contains(rj.Methods[:i], m) {
				return fmt.Errorf("methods %q: listed twice; want each method once", m)
			}
		}
		r.Methods = slices.Clone(rj.Methods)
	}
	if rj.AllowHeaders != nil {
		if r.Auth == nil {
			return errors.New("allowHeaders: only a route with auth filters client headers; add auth or remove allowHeaders")
		}
		for _, h := range rj.AllowHeaders {
			if err := r.checkAllowHeader(h); err != nil {
				return fmt.Errorf("allowHeaders %q: %v", h, err)
			}
		}
		r.AllowHeaders = slices.Clone(rj.AllowHeaders)
	}
	if rj.AllowQuery != nil {
		if r.Auth == nil {
			return errors.New("allowQuery: only a route with auth filters query parameters; add auth or remove allowQuery")
		}
		for _, q := range rj.AllowQuery {
			name, value, _ := strings.Cut(q, "=")
			if !queryWord(name) || name == "" || value != "" && !queryWord(value) {
				return fmt.Errorf("allowQuery %q: want a query parameter name, or name=value, of letters, digits and -._~, such as comp=list or prefix", q)
			}
		}
		r.AllowQuery = slices.Clone(rj.AllowQuery)
	}
	return nil
}

// checkAllowHeader says why h cannot be an allowHeaders entry of r.
func (r *Route) checkAllowHeader(h string) error {
	name, prefix := strings.CutSuffix(h, "*")
	n := HeaderKey(name)
	switch {
	case !IsToken(name):
		return errors.New("want a header name, or a prefix ending in -*, such as x-amz-meta-*")
	case !guarded(n):
		return errors.New("want an x-amz-* or x-ms-* header: other headers pass anyway")
	case prefix && (!strings.HasSuffix(n, "-") || slices.Contains(guardedPrefixes, n)):
		return errors.New("want a prefix narrower than the namespace, ending in -*, such as x-amz-meta-*")
	case slices.ContainsFunc(sigV4Replaced, func(s string) bool { return HeaderKey(s) == n }):
		return errors.New("the signature sets it; it cannot be allowed")
	}
	return nil
}

// methodName reports whether m is an upper-case method token.
func methodName(m string) bool {
	if m == "" || len(m) > 32 {
		return false
	}
	for _, c := range m {
		if !(c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// queryWord reports whether s is made of URL-unreserved characters only
// (RFC 3986 §2.3), so it reads the same escaped or not.
func queryWord(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return false
		}
	}
	return len(s) <= 128
}
