package async

import "testing"

// TestPredictor: a route is predicted once its window is full and more
// than a tenth of it outlasted the trigger (p90 above it); one predicted
// request in ten runs as usual; answers within the trigger end it.
func TestPredictor(t *testing.T) {
	p := &Predictor{Window: 10}
	for range 9 {
		p.observe("/a", true)
	}
	if p.predict("/a") {
		t.Fatal("predicted with 9 of 10 samples")
	}
	p.observe("/a", false)
	if !p.predict("/a") {
		t.Fatal("9 of 10 over the trigger: want predicted")
	}
	if p.predict("/b") {
		t.Error("another route predicted")
	}
	predicted := 1
	for range 9 {
		if p.predict("/a") {
			predicted++
		}
	}
	if predicted != 9 {
		t.Errorf("%d of 10 predicted; want 9 (one probe)", predicted)
	}
	// p90 of ten: the 9th smallest. One over: p90 within the trigger.
	q := &Predictor{Window: 10}
	for i := range 10 {
		q.observe("/a", i == 0)
	}
	if q.predict("/a") {
		t.Error("1 of 10 over: p90 is within the trigger; want not predicted")
	}
	q.observe("/a", true) // replaces the oldest (over): still one
	if q.predict("/a") {
		t.Error("still 1 of 10 over; want not predicted")
	}
	q.observe("/a", true) // two of ten over: p90 above the trigger
	if !q.predict("/a") {
		t.Error("2 of 10 over: want predicted")
	}
	var off *Predictor
	off.observe("/a", true)
	if off.predict("/a") {
		t.Error("a nil Predictor predicted")
	}
}
