package customtools

import (
	"errors"
	"fmt"

	"github.com/countbot/toolsvc/internal/egress"
)

// parseNetwork reads a command tool's "network": true or false, or a list
// of destinations (host names, *.wildcards, CIDRs, each with an optional
// :port), which its programs then reach only through the service's proxy.
func parseNetwork(v any) (on bool, allow []string, err error) {
	switch n := v.(type) {
	case nil:
		return false, nil, nil
	case bool:
		return n, nil, nil
	case []any:
		for _, e := range n {
			s, ok := e.(string)
			if !ok {
				return false, nil, fmt.Errorf("network: %v is not a host name; give a list of hosts such as [registry.npmjs.org, \"*.pythonhosted.org\"]", e)
			}
			allow = append(allow, s)
		}
		if len(allow) == 0 {
			return false, nil, errors.New("network is an empty list: give the hosts the tool may reach, or false for none")
		}
		if _, err := egress.ParseRules(allow, nil); err != nil {
			return false, nil, fmt.Errorf("network: %w", err)
		}
		return false, allow, nil
	}
	return false, nil, fmt.Errorf("network: %v: give true, false, or a list of the hosts the tool may reach", v)
}
