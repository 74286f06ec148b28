package agent

import "testing"

// TestStatusLineTurns: a workflow agent that ended after one model reply
// is "in 1 turn", not "1 turns".
func TestStatusLineTurns(t *testing.T) {
	for turns, want := range map[int]string{1: "completed in 1 turn, sa-1", 2: "completed in 2 turns, sa-1"} {
		if got := statusLine(AgentResult{AgentID: "sa-1", Status: StatusCompleted, Turns: turns}); got != want {
			t.Errorf("%d turns: %q, want %q", turns, got, want)
		}
	}
}
