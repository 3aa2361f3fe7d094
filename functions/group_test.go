package main

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupInterruptsAllWhenOneReturns: when one goroutine returns, every
// goroutine's interrupt is called with its error, and Run returns that
// error once all have returned.
func TestGroupInterruptsAllWhenOneReturns(t *testing.T) {
	boom := errors.New("boom")
	var g group
	got := make([]error, 3)
	for i := range 2 {
		stop := make(chan struct{})
		g.Add(func() error { <-stop; return nil }, func(err error) { got[i] = err; close(stop) })
	}
	g.Add(func() error { return boom }, func(err error) { got[2] = err })
	if err := g.Run(); err != boom {
		t.Fatalf("Run() = %v; want %v", err, boom)
	}
	for i, err := range got {
		if err != boom {
			t.Errorf("actor %d interrupted with %v; want %v", i, err, boom)
		}
	}
}

// TestGroupWaitsForAll: Run returns only after the slowest goroutine has
// returned from its interrupt, and with the first error any of them
// returned when the first to return returned none.
func TestGroupWaitsForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := errors.New("shutdown failed")
		const linger = 3 * time.Second
		var g group
		done := false
		g.Add(func() error { return nil }, func(error) {})
		stop := make(chan struct{})
		g.Add(func() error {
			<-stop
			time.Sleep(linger) // a graceful shutdown
			done = true
			return late
		}, func(error) { close(stop) })
		start := time.Now()
		err := g.Run()
		if !done || time.Since(start) != linger {
			t.Errorf("Run returned after %v (slow actor done: %v); want after %v", time.Since(start), done, linger)
		}
		if err != late {
			t.Errorf("Run() = %v; want the first error, %v", err, late)
		}
	})
}

func TestGroupEmpty(t *testing.T) {
	var g group
	if err := g.Run(); err != nil {
		t.Fatalf("empty group: Run() = %v; want nil", err)
	}
}
