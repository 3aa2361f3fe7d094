package core

import "testing"

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
