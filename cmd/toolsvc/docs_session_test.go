//go:build unix

package main

import (
	"testing"
	"time"
)

// TestDocSessionBackgroundSave runs a command left in the background whose
// script saves the state a second after it starts, then an export, and
// reads the variable once that second is over: the runner waits for the
// background command's save before going on, so that it cannot undo the
// export, as it did when the two saves raced.
func TestDocSessionBackgroundSave(t *testing.T) {
	s := newDocSession(t)
	s.run(t, "page.md", docCmd{line: 1, text: "sleep 1; sleep 3 &"})
	s.run(t, "page.md", docCmd{line: 2, text: "export A=kept"})
	time.Sleep(2 * time.Second)
	s.run(t, "page.md", docCmd{line: 3, text: `echo "A=$A"`, hasWant: true, wantText: []string{"A=kept"}})
}

// TestDocSessionStopBackground: a program left in the background, which
// ignores SIGINT there as bash leaves it (sleep here, python3 -m
// http.server on a page), is stopped at the end of the page at once, not
// after the 15 seconds the runner gives a server to end.
func TestDocSessionStopBackground(t *testing.T) {
	s := newDocSession(t)
	s.run(t, "page.md", docCmd{line: 1, text: "sleep 300 &"})
	start := time.Now()
	s.stopServers(t, 0)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping the background sleep took %s", d)
	}
}
