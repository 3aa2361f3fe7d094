package azure

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Defaults of a connection string, as Azure documents them.
const (
	defaultProtocol = "https"
	defaultSuffix   = "core.windows.net"
)

// The development storage account (Azurite, the storage emulator), selected
// by UseDevelopmentStorage=true.
const (
	devAccountName   = "devstoreaccount1"
	devAccountKey    = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	devBlobEndpoint  = "http://127.0.0.1:10000/devstoreaccount1"
	devQueueEndpoint = "http://127.0.0.1:10001/devstoreaccount1"
)

// ConnectionString is a parsed storage account connection string
// ("DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…;…").
// ParseConnectionString fills the defaults, so the zero value is not a
// usable connection string.
type ConnectionString struct {
	// AccountName names the storage account.
	AccountName string
	// AccountKey is the account's base64 key, which signs requests and SAS
	// URLs. String never shows it.
	AccountKey string
	// DefaultEndpointsProtocol is "https" (the default) or "http"; it is
	// used for the endpoints derived from AccountName and EndpointSuffix.
	DefaultEndpointsProtocol string
	// EndpointSuffix is the DNS suffix of derived endpoints,
	// "core.windows.net" by default.
	EndpointSuffix string
	// BlobEndpoint and QueueEndpoint are the service URLs given explicitly;
	// when empty, BlobServiceURL and QueueServiceURL derive them.
	BlobEndpoint, QueueEndpoint string
	// UseDevelopmentStorage is set by "UseDevelopmentStorage=true", which
	// stands for Azurite's development account on its default ports; the
	// other fields then hold that account's values.
	UseDevelopmentStorage bool
}

// BlobServiceURL returns the Blob service URL: BlobEndpoint when given,
// otherwise "<protocol>://<account>.blob.<suffix>".
func (c ConnectionString) BlobServiceURL() string {
	if c.BlobEndpoint != "" {
		return c.BlobEndpoint
	}
	return c.DefaultEndpointsProtocol + "://" + c.AccountName + ".blob." + c.EndpointSuffix
}

// QueueServiceURL returns the Queue service URL: QueueEndpoint when given,
// otherwise "<protocol>://<account>.queue.<suffix>".
func (c ConnectionString) QueueServiceURL() string {
	if c.QueueEndpoint != "" {
		return c.QueueEndpoint
	}
	return c.DefaultEndpointsProtocol + "://" + c.AccountName + ".queue." + c.EndpointSuffix
}

// String formats c as a connection string with the account key redacted,
// safe to log.
func (c ConnectionString) String() string {
	return c.format("<redacted>")
}

// format renders c as a connection string with key as its AccountKey.
// ParseConnectionString(c.format(c.AccountKey)) returns c.
func (c ConnectionString) format(key string) string {
	if c.UseDevelopmentStorage {
		return "UseDevelopmentStorage=true"
	}
	var b strings.Builder
	b.WriteString("DefaultEndpointsProtocol=" + c.DefaultEndpointsProtocol)
	b.WriteString(";AccountName=" + c.AccountName)
	b.WriteString(";AccountKey=" + key)
	b.WriteString(";EndpointSuffix=" + c.EndpointSuffix)
	if c.BlobEndpoint != "" {
		b.WriteString(";BlobEndpoint=" + c.BlobEndpoint)
	}
	if c.QueueEndpoint != "" {
		b.WriteString(";QueueEndpoint=" + c.QueueEndpoint)
	}
	return b.String()
}

// connStringKeys are the names ParseConnectionString accepts, by lower-case
// name. Names are matched without regard to case, as Azure's own parsers do.
var connStringKeys = map[string]string{
	"accountname":              "AccountName",
	"accountkey":               "AccountKey",
	"defaultendpointsprotocol": "DefaultEndpointsProtocol",
	"endpointsuffix":           "EndpointSuffix",
	"blobendpoint":             "BlobEndpoint",
	"queueendpoint":            "QueueEndpoint",
	"usedevelopmentstorage":    "UseDevelopmentStorage",
	"sharedaccesssignature":    "SharedAccessSignature",
	// Endpoints of services the gateway does not use: accepted, ignored.
	"tableendpoint":          "TableEndpoint",
	"fileendpoint":           "FileEndpoint",
	"blobsecondaryendpoint":  "BlobSecondaryEndpoint",
	"queuesecondaryendpoint": "QueueSecondaryEndpoint",
	"tablesecondaryendpoint": "TableSecondaryEndpoint",
	"filesecondaryendpoint":  "FileSecondaryEndpoint",
}

// ParseConnectionString parses a storage account connection string: parts
// "Name=Value" separated by ";". It accepts AccountName, AccountKey,
// DefaultEndpointsProtocol, EndpointSuffix, BlobEndpoint, QueueEndpoint
// (and ignores the Table and File endpoints), or UseDevelopmentStorage=true
// alone. AccountName and AccountKey are required; a SharedAccessSignature
// is refused, since the gateway signs its own URLs.
//
// Errors name the offending part and never contain the account key.
func ParseConnectionString(s string) (ConnectionString, error) {
	if strings.TrimSpace(s) == "" {
		return ConnectionString{}, errors.New("connection string: empty")
	}
	vals := make(map[string]string) // by canonical name
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue // "a=b;;c=d" and a trailing ";" are common
		}
		name, value, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		value = strings.TrimSpace(value)
		if !ok || name == "" {
			// Not echoed: it may be a piece of a mangled key.
			return ConnectionString{}, fmt.Errorf("connection string: part %d is not Name=Value", i+1)
		}
		canon, known := connStringKeys[strings.ToLower(name)]
		if !known {
			if isWord(name) {
				return ConnectionString{}, fmt.Errorf("connection string: unknown name %q", name)
			}
			return ConnectionString{}, fmt.Errorf("connection string: part %d has an unknown name", i+1)
		}
		if _, dup := vals[canon]; dup {
			return ConnectionString{}, fmt.Errorf("connection string: %s given twice", canon)
		}
		if value == "" {
			return ConnectionString{}, fmt.Errorf("connection string: %s is empty", canon)
		}
		vals[canon] = value
	}
	if len(vals) == 0 {
		return ConnectionString{}, errors.New("connection string: no Name=Value parts")
	}
	if _, ok := vals["SharedAccessSignature"]; ok {
		return ConnectionString{}, errors.New("connection string: SharedAccessSignature is not supported; give AccountName and AccountKey, or use identity-based service URIs")
	}
	if dev, ok := vals["UseDevelopmentStorage"]; ok {
		return parseDevStorage(dev, vals)
	}

	c := ConnectionString{
		AccountName:              vals["AccountName"],
		AccountKey:               vals["AccountKey"],
		DefaultEndpointsProtocol: defaultProtocol,
		EndpointSuffix:           defaultSuffix,
	}
	if p, ok := vals["DefaultEndpointsProtocol"]; ok {
		p = strings.ToLower(p)
		if p != "https" && p != "http" {
			return ConnectionString{}, fmt.Errorf("connection string: DefaultEndpointsProtocol %q: want https or http", p)
		}
		c.DefaultEndpointsProtocol = p
	}
	if sfx, ok := vals["EndpointSuffix"]; ok {
		if err := checkSuffix(sfx); err != nil {
			return ConnectionString{}, fmt.Errorf("connection string: EndpointSuffix %q: %w", sfx, err)
		}
		c.EndpointSuffix = sfx
	}
	if c.AccountName == "" {
		return ConnectionString{}, errors.New("connection string: AccountName missing")
	}
	if err := checkAccountName(c.AccountName); err != nil {
		return ConnectionString{}, fmt.Errorf("connection string: AccountName %q: %w", c.AccountName, err)
	}
	if c.AccountKey == "" {
		return ConnectionString{}, errors.New("connection string: AccountKey missing")
	}
	if _, err := base64.StdEncoding.DecodeString(c.AccountKey); err != nil {
		return ConnectionString{}, errors.New("connection string: AccountKey is not valid base64")
	}
	for _, ep := range []struct {
		name string
		dst  *string
	}{{"BlobEndpoint", &c.BlobEndpoint}, {"QueueEndpoint", &c.QueueEndpoint}} {
		v, ok := vals[ep.name]
		if !ok {
			continue
		}
		if err := checkServiceURL(v); err != nil {
			return ConnectionString{}, fmt.Errorf("connection string: %s %q: %w", ep.name, v, err)
		}
		*ep.dst = v
	}
	return c, nil
}

// parseDevStorage handles UseDevelopmentStorage, which stands alone.
func parseDevStorage(value string, vals map[string]string) (ConnectionString, error) {
	if !strings.EqualFold(value, "true") {
		return ConnectionString{}, fmt.Errorf("connection string: UseDevelopmentStorage %q: want true", value)
	}
	for name := range vals {
		if name != "UseDevelopmentStorage" {
			return ConnectionString{}, fmt.Errorf("connection string: UseDevelopmentStorage=true cannot be combined with %s", name)
		}
	}
	return ConnectionString{
		AccountName:              devAccountName,
		AccountKey:               devAccountKey,
		DefaultEndpointsProtocol: "http",
		EndpointSuffix:           defaultSuffix,
		BlobEndpoint:             devBlobEndpoint,
		QueueEndpoint:            devQueueEndpoint,
		UseDevelopmentStorage:    true,
	}, nil
}

// checkAccountName applies Azure's rule, loosened to 1–63 characters so
// that emulators' custom accounts pass: lower-case letters and digits.
func checkAccountName(name string) error {
	if len(name) > 63 {
		return errors.New("longer than 63 characters")
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return errors.New("want lower-case letters and digits")
		}
	}
	return nil
}

// checkSuffix accepts a DNS suffix such as "core.windows.net".
func checkSuffix(sfx string) error {
	if strings.HasPrefix(sfx, ".") || strings.HasSuffix(sfx, ".") || strings.Contains(sfx, "..") {
		return errors.New("want a DNS suffix such as core.windows.net")
	}
	for _, r := range sfx {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '.' && r != '-' {
			return errors.New("want a DNS suffix such as core.windows.net")
		}
	}
	return nil
}

// checkServiceURL accepts an absolute http or https URL with a host and no
// query or fragment.
func checkServiceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("must not contain user information")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return errors.New("must not contain a query or fragment")
	case strings.ContainsAny(s, " \t\r\n;"):
		return errors.New("must not contain spaces or ';'")
	}
	return nil
}

// isWord reports whether s is short and made of ASCII letters only, so it
// is safe to echo as a name.
func isWord(s string) bool {
	if len(s) > 40 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// CarriesCredential reports whether the connection string s carries a
// credential: an AccountKey or a SharedAccessSignature with a value, or
// UseDevelopmentStorage with any value but false (the emulator's
// well-known key). The azurerm provider writes a connection string without
// one ("DefaultEndpointsProtocol=https;AccountName=<acct>;AccountKey=;EndpointSuffix=core.windows.net")
// for an app whose storage is reached with its managed identity: that
// string names the account but authorizes nothing.
//
// Names are matched without regard to case; other parts are not checked
// (ParseConnectionString does that). A part that is not Name=Value is an
// error, since what it holds cannot be told; the error never echoes it.
func CarriesCredential(s string) (bool, error) {
	if strings.TrimSpace(s) == "" {
		return false, nil
	}
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return false, fmt.Errorf("connection string: part %d is not Name=Value", i+1)
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "accountkey", "sharedaccesssignature":
			if value != "" {
				return true, nil
			}
		case "usedevelopmentstorage":
			if value != "" && !strings.EqualFold(value, "false") {
				return true, nil
			}
		}
	}
	return false, nil
}
