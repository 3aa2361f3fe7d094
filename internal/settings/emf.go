package settings

import (
	"fmt"
	"strings"
)

// EmfNamespace is a CloudWatch metric namespace (setting EmfNamespace): 1 to
// 255 printable ASCII characters, not starting with "AWS/" (reserved for AWS
// services). The zero value means no Embedded Metric Format output.
type EmfNamespace string

// Decode parses s, for envconfig.
func (n *EmfNamespace) Decode(s string) error {
	if s == "" {
		*n = ""
		return nil
	}
	if len(s) > 255 {
		return fmt.Errorf("want a CloudWatch namespace of at most 255 characters, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("want printable ASCII characters only, got byte 0x%02x at %d", c, i)
		}
	}
	if strings.HasPrefix(s, "AWS/") {
		return fmt.Errorf("namespaces starting with AWS/ are reserved for AWS services")
	}
	*n = EmfNamespace(s)
	return nil
}
