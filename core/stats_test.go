package core

import (
	"strconv"
	"testing"
)

// TestEndName: for every reason, CountEnd adds one to exactly the counter
// EndName names (and to none when it names none), so the Embedded Metric
// Format line's endings and /_gateway/stats agree.
func TestEndName(t *testing.T) {
	for r := ReasonNone; r <= ReasonQueryNotAllowed; r++ {
		t.Run(r.Code()+"/"+r.EndName(), func(t *testing.T) {
			var s Stats
			s.CountEnd(r)
			var counted []string
			for name, v := range s.Snapshot() {
				if v != 0 {
					counted = append(counted, name)
				}
			}
			want := r.EndName()
			switch {
			case want == "" && len(counted) != 0:
				t.Errorf("reason %d: EndName is empty but CountEnd counted %q", r, counted)
			case want != "" && (len(counted) != 1 || counted[0] != want):
				t.Errorf("reason %d: CountEnd counted %q; EndName says %q", r, counted, want)
			}
		})
	}
}

// TestStatusClassName: for every status code, CountStatus adds one to
// exactly the counter StatusClassName names (and to none when it names
// none), so the Embedded Metric Format line's status class and
// /_gateway/stats agree.
func TestStatusClassName(t *testing.T) {
	for _, c := range []struct {
		code int
		want string
	}{
		{0, ""}, {101, ""}, {199, ""}, {200, "status_2xx"}, {202, "status_2xx"}, {299, "status_2xx"},
		{304, "status_3xx"}, {404, "status_4xx"}, {429, "status_4xx"}, {499, "status_4xx"},
		{500, "status_5xx"}, {503, "status_5xx"}, {504, "status_5xx"}, {599, "status_5xx"}, {600, ""}, {-200, ""},
	} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			if got := StatusClassName(c.code); got != c.want {
				t.Errorf("StatusClassName(%d) = %q; want %q", c.code, got, c.want)
			}
			var s Stats
			s.CountStatus(c.code)
			var counted []string
			for name, v := range s.Snapshot() {
				if v != 0 {
					counted = append(counted, name)
				}
			}
			switch {
			case c.want == "" && len(counted) != 0:
				t.Errorf("CountStatus(%d) counted %q; want none", c.code, counted)
			case c.want != "" && (len(counted) != 1 || counted[0] != c.want):
				t.Errorf("CountStatus(%d) counted %q; want %s", c.code, counted, c.want)
			}
		})
	}
}
