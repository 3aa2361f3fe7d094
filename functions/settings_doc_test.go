package main

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"fngateway/internal/settings"
)

// settingsDoc is the settings reference users read.
const settingsDoc = "../docs/settings.md"

// docRow is one row of the settings table: the names in its first column,
// its default and its unit.
type docRow struct {
	names         []string
	def, unit     string
	reload        string
	line          int
	nameColumnRaw string
}

// readSettingsTable returns the rows of the first table under "## Settings".
func readSettingsTable(tb testing.TB) []docRow {
	tb.Helper()
	b, err := os.ReadFile(settingsDoc)
	if err != nil {
		tb.Fatalf("read the settings reference: %v", err)
	}
	var rows []docRow
	inSection, inTable := false, false
	tick := regexp.MustCompile("`([^`]+)`")
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			if inSection && inTable {
				return rows
			}
			inSection = strings.TrimSpace(line) == "## Settings"
		case inSection && strings.HasPrefix(line, "|"):
			inTable = true
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) < 5 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "setting" {
				continue
			}
			r := docRow{
				def:           strings.Trim(strings.TrimSpace(cells[1]), "`"),
				unit:          strings.TrimSpace(cells[2]),
				reload:        strings.TrimSpace(cells[3]),
				line:          i + 1,
				nameColumnRaw: cells[0],
			}
			for _, m := range tick.FindAllStringSubmatch(cells[0], -1) {
				r.names = append(r.names, m[1])
			}
			rows = append(rows, r)
		case inTable && inSection && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "|"):
			return rows
		}
	}
	return rows
}

// TestSettingsReferenceMatchesCode keeps docs/settings.md equal to
// settings.Settings: every field has a row, its default is the struct tag's,
// its unit fits the field's type, its Reload column is the class
// internal/settings gives it (settings.Classes), and no row names a setting
// the code does not read (the platform's and OpenTelemetry's own variables
// aside, which are read once at start-up: COLD).
func TestSettingsReferenceMatchesCode(t *testing.T) {
	rows := readSettingsTable(t)
	if len(rows) == 0 {
		t.Fatalf("%s: no settings table under \"## Settings\"", settingsDoc)
	}
	byName := map[string]docRow{}
	for _, r := range rows {
		for _, n := range r.names {
			byName[n] = r
		}
	}
	typ := reflect.TypeFor[settings.Settings]()
	fields := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fields[f.Name] = true
		r, ok := byName[f.Name]
		if !ok {
			t.Errorf("%s: no row for setting %s", settingsDoc, f.Name)
			continue
		}
		def, hasDef := f.Tag.Lookup("default")
		switch {
		case hasDef && r.def != def:
			t.Errorf("%s:%d: %s default %q, code says %q", settingsDoc, r.line, f.Name, r.def, def)
		case !hasDef && regexp.MustCompile(`^[0-9.]+$`).MatchString(r.def):
			t.Errorf("%s:%d: %s default %q, but the code has no default", settingsDoc, r.line, f.Name, r.def)
		}
		var unitOK bool
		switch f.Type {
		case reflect.TypeFor[settings.Millis]():
			unitOK = r.unit == "ms"
		case reflect.TypeFor[settings.Seconds]():
			unitOK = r.unit == "s" || strings.HasPrefix(r.unit, "s ")
		case reflect.TypeFor[settings.Count]():
			unitOK = r.unit == "count" || r.unit == "bytes" || r.unit == "%"
		case reflect.TypeFor[settings.Bool]():
			unitOK = r.unit == "bool"
		default:
			unitOK = r.unit != ""
		}
		switch class, ok := settings.Classes[f.Name]; {
		case !ok:
			t.Errorf("setting %s has no Reload class: add it to settings.Classes (internal/settings/reload_class.go), WARM if a reload may change it between requests, COLD if it binds the process", f.Name)
		case r.reload != string(class):
			t.Errorf("%s:%d: %s Reload %q, settings.Classes says %q", settingsDoc, r.line, f.Name, r.reload, class)
		}
		if !unitOK {
			t.Errorf("%s:%d: %s unit %q does not fit its type %s", settingsDoc, r.line, f.Name, r.unit, f.Type.Name())
		}
	}
	external := regexp.MustCompile(`^(AzureWebJobsStorage__|AWS_|OTEL_|GOGC$|GOMEMLIMIT$)`)
	for _, r := range rows {
		if len(r.names) == 1 && r.names[0] == "GOGC" && r.def != strconv.Itoa(gcPercent) {
			t.Errorf("%s:%d: GOGC default %q; the gateway sets %d (gcPercent)", settingsDoc, r.line, r.def, gcPercent)
		}
		for _, n := range r.names {
			if class, ok := settings.Classes[n]; ok && !fields[n] {
				// The source's own settings.
				if r.reload != string(class) {
					t.Errorf("%s:%d: %s Reload %q, settings.Classes says %q", settingsDoc, r.line, n, r.reload, class)
				}
				continue
			}
			if fields[n] {
				continue
			}
			if external.MatchString(n) || n == instanceMemorySetting || strings.HasSuffix(n, "…") {
				if r.reload != string(settings.Cold) {
					t.Errorf("%s:%d: %s Reload %q; the platform's and Go's own variables are read once at start-up: COLD", settingsDoc, r.line, n, r.reload)
				}
				continue
			}
			t.Errorf("%s:%d: row names %s, which settings.Settings does not have", settingsDoc, r.line, n)
		}
	}
}
