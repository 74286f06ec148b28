package mcpmount

import (
	"strings"
	"testing"
	"time"
)

// TestParsePerKey: per_key takes its bounds from the entry or the
// defaults, and is refused where it cannot apply, with a message naming
// the key.
func TestParsePerKey(t *testing.T) {
	for _, tc := range []struct {
		entry string
		idle  time.Duration
		max   int
	}{
		{`{"command":"x","per_key":true}`, DefaultIdleTimeout, DefaultMaxInstances},
		{`{"command":"x","per_key":true,"idle_timeout":90,"max_instances":3}`, 90 * time.Second, 3},
		{`{"command":"x","per_key":true,"idle_timeout":"10m"}`, 10 * time.Minute, DefaultMaxInstances},
		{`{"command":"x"}`, 0, 0},
	} {
		c, err := ParseConfig([]byte(tc.entry))
		if err != nil {
			t.Errorf("%s: %v", tc.entry, err)
			continue
		}
		if c.IdleTimeout != tc.idle || c.MaxInstances != tc.max {
			t.Errorf("%s: idle %v, max %d", tc.entry, c.IdleTimeout, c.MaxInstances)
		}
	}
	for _, tc := range []struct{ entry, want string }{
		{`{"url":"http://x/mcp","per_key":true}`, `"per_key" applies to stdio servers`},
		{`{"command":"x","idle_timeout":60}`, `add it, or remove them`},
		{`{"command":"x","max_instances":2}`, `add it, or remove them`},
		{`{"command":"x","per_key":true,"cwd":"sub"}`, `"cwd" does not go with "per_key"`},
		{`{"command":"x","per_key":true,"max_instances":0}`, `max_instances 0: give a whole number, at least 1`},
		{`{"command":"x","per_key":true,"max_instances":2.5}`, `max_instances 2.5`},
		{`{"command":"x","per_key":true,"idle_timeout":0}`, `idle_timeout must be more than zero`},
		{`{"command":"x","per_key":true,"idle_timeout":"soon"}`, `idle_timeout "soon": give seconds`},
		{`{"command":"x","per_key":"yes"}`, `per_key`},
	} {
		if _, err := ParseConfig([]byte(tc.entry)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.entry, err, tc.want)
		}
	}
}
