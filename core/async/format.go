package async

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Format versions and unknown members (docs/operations.md, "Upgrades and
// rollbacks"). Two releases of the gateway run side by side on one store
// during a rolling deploy, a slot swap or a Lambda alias shift, and a
// rollback hands the newer one's records and messages to the older one. So
// every reader of the stored formats (continuation message, record,
// idempotency entry):
//
//   - accepts the members it knows and ignores, without error, the ones it
//     does not: a newer release may add a member;
//   - keeps a record's unknown members and writes them back when it rewrites
//     the record (unknownMembers), so that an older release's claim or
//     cancel does not drop what a newer one wrote;
//   - refuses only a format version newer than its own, with an error
//     wrapping ErrNewerFormat that leaves the message for a build that can
//     read it: never consumed, the record never marked corrupt.
//
// The rule for the next releases: a new member that an older release may
// ignore keeps the format version; a member that must not be ignored (one
// that changes what an older release would do with the request) bumps it.
// A release writes a new member only where it has one to write, so a
// request that needs none stays readable by the release before it.

// ErrNewerFormat is wrapped by the error for a continuation message, record
// or idempotency entry written in a format version newer than this build
// reads: a newer release beside this one (rolling deploy) or before it (a
// rollback) wrote it. The message is left for a build that can read it:
// Async.Process returns an error wrapping ErrNewerFormat (not
// ErrBadMessage), which the adapters treat as a transient failure, so the
// queue delivers it again; a status read answers 503 AsyncUnavailable.
var ErrNewerFormat = errors.New("format version newer than this build reads")

// newerFormat is the error for what, written in format version v, newer
// than max, the newest this build reads.
func newerFormat(what string, v, max int) error {
	return fmt.Errorf("%s in format version %d, newer than this build reads (%d); left for a build that can: %w", what, v, max, ErrNewerFormat)
}

// formatVersion returns the "v" member of the JSON object b: at least 1.
// Any member may come with it; b must be one JSON object.
func formatVersion(b []byte) (int, error) {
	var w struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return 0, err
	}
	if w.V < 1 {
		return 0, fmt.Errorf("format version %d, want at least 1", w.V)
	}
	return w.V, nil
}

// unknownMembers are the members of a JSON object that a Go struct type
// does not know, and those of the members named deep (objects whose own
// unknown members are kept too). A nil *unknownMembers holds none.
type unknownMembers struct {
	own    map[string]json.RawMessage
	nested map[string]*unknownMembers
}

// collectUnknown returns the members of the JSON object b that t (a struct
// type) has no field for, as encoding/json matches names (exactly, or else
// ignoring case), and the unknown members of b's members named deep, which
// must be fields of t of struct or pointer-to-struct type. It returns nil
// when there are none, or when b is not a JSON object.
func collectUnknown(b []byte, t reflect.Type, deep ...string) *unknownMembers {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || obj == nil {
		return nil
	}
	fields := jsonFields(t)
	var u unknownMembers
	for k, v := range obj {
		name, ft, ok := fields.lookup(k)
		switch {
		case !ok:
			if u.own == nil {
				u.own = map[string]json.RawMessage{}
			}
			u.own[k] = v
		case name == k && contains(deep, name):
			if c := collectUnknown(v, ft); c != nil {
				if u.nested == nil {
					u.nested = map[string]*unknownMembers{}
				}
				u.nested[name] = c
			}
		}
	}
	if u.own == nil && u.nested == nil {
		return nil
	}
	return &u
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// merge returns enc, a JSON object encoded from the Go value, with the kept
// members added back: each one the encoding does not have, and the nested
// ones inside their members when the encoding has them as objects. Without
// kept members it returns enc unchanged; with some, the members come out
// in sorted order.
func (u *unknownMembers) merge(enc []byte) ([]byte, error) {
	if u == nil {
		return enc, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(enc, &obj); err != nil {
		return nil, err
	}
	for name, c := range u.nested {
		if v, ok := obj[name]; ok && len(v) > 0 && v[0] == '{' {
			m, err := c.merge(v)
			if err != nil {
				return nil, err
			}
			obj[name] = m
		}
	}
	for k, v := range u.own {
		if _, ok := obj[k]; !ok {
			obj[k] = v
		}
	}
	return json.Marshal(obj)
}

// fieldSet is the JSON names of a struct type's fields, with the types
// (pointers taken off) they decode into.
type fieldSet map[string]reflect.Type

// lookup finds the field that encoding/json decodes member k into: the
// one named k, or else one whose name equals k ignoring case (Unicode
// case folding, a superset of what encoding/json folds).
func (fs fieldSet) lookup(k string) (string, reflect.Type, bool) {
	if t, ok := fs[k]; ok {
		return k, t, true
	}
	for name, t := range fs {
		if strings.EqualFold(name, k) {
			return name, t, true
		}
	}
	return "", nil, false
}

var fieldSets sync.Map // reflect.Type → fieldSet

// jsonFields returns the JSON names of the exported fields of struct type
// t, as encoding/json names them (tag name, else the field's name; "-"
// and unexported fields left out).
func jsonFields(t reflect.Type) fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(fieldSet)
	}
	fs := fieldSet{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		fs[name] = ft
	}
	fieldSets.Store(t, fs)
	return fs
}
