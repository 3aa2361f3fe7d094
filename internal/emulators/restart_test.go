package emulators_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"fngateway/internal/emulators"
)

// TestRestartWaitsForItsPort stops each emulator, lets another listener
// take its port, and starts it again: the start must not take that other
// listener for the emulator (a dial to the port succeeds all along), but
// wait until the port is free and the emulator itself serves on it.
func TestRestartWaitsForItsPort(t *testing.T) {
	t.Parallel()
	type emulator struct {
		endpoint string
		log      func() string
		stop     func()
		start    func(testing.TB)
	}
	for _, tt := range []struct {
		name string
		run  func(testing.TB) emulator
	}{
		{"versitygw", func(tb testing.TB) emulator {
			v := emulators.StartVersitygw(tb)
			return emulator{v.Endpoint(), v.Log, v.Stop, v.Start}
		}},
		{"fauxqs", func(tb testing.TB) emulator {
			f := emulators.StartFauxqs(tb)
			return emulator{f.Endpoint(), f.Log, f.Stop, f.Start}
		}},
		{"azurite", func(tb testing.TB) emulator {
			a := emulators.StartAzurite(tb)
			return emulator{a.BlobEndpoint(), a.Log, a.Stop, a.Start}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := tt.run(t)
			u, err := url.Parse(e.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			e.stop()
			squatter, err := net.Listen("tcp", u.Host)
			if err != nil {
				t.Fatalf("take the stopped emulator's port: %v", err)
			}
			// Let go of the port once the emulator has found it taken.
			released := make(chan struct{})
			go func() {
				defer close(released)
				defer squatter.Close()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for range tick.C {
					if log := e.log(); strings.Contains(log, "address already in use") {
						return
					}
				}
			}()
			e.start(t)
			<-released
			resp, err := http.Get(e.endpoint + "/")
			if err != nil {
				t.Fatalf("GET %s after the restart: %v\n%s", e.endpoint, err, e.log())
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
}
