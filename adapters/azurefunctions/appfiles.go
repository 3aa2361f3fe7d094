package azurefunctions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FunctionJSON is the part of a function.json the gateway reads.
type FunctionJSON struct {
	Bindings []Binding `json:"bindings"`
}

// Binding is one entry of a function.json's bindings.
type Binding struct {
	Type       string   `json:"type"`
	Direction  string   `json:"direction"`
	Name       string   `json:"name"`
	QueueName  string   `json:"queueName"`
	Connection string   `json:"connection"`
	Route      string   `json:"route"`
	AuthLevel  string   `json:"authLevel"`
	Methods    []string `json:"methods"`
}

// ContinuationQueue returns the queue the continuation function is
// triggered by, from continuation/function.json under the app root, with a
// %AppSetting% reference resolved through lookup. It returns "" when the
// file does not exist (the binary runs outside a function app).
func ContinuationQueue(root string, lookup func(string) (string, bool)) (string, error) {
	path := filepath.Join(root, "continuation", "function.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var f FunctionJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, bd := range f.Bindings {
		if bd.Type != "queueTrigger" {
			continue
		}
		if bd.Name != BindingName {
			return "", fmt.Errorf("%s: the queue trigger's binding is named %q; want %q", path, bd.Name, BindingName)
		}
		q := bd.QueueName
		if name, ok := strings.CutPrefix(q, "%"); ok && strings.HasSuffix(name, "%") {
			v, _ := lookup(strings.TrimSuffix(name, "%"))
			q = v
		}
		return q, nil
	}
	return "", fmt.Errorf("%s: no queueTrigger binding", path)
}
