package customtools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// TestHTTPToolMistakes: each way an operator's http tool fails that the
// model cannot mend by itself gets one next step, and it is the model's
// to take (tell the user; the operator changes the tools file or a
// setting), never "use another URL": the URL is the operator's.
func TestHTTPToolMistakes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:1/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, url    string
		allowPrivate bool
		want         []string
	}{
		{"loopback refused", srv.URL + "/x", false, []string{
			"t: the network guard refused the request to the tool's own URL, which the operator set in the tools file: ",
			"is not a public address",
			"Next: do not retry or change the arguments, which cannot help; tell the user that this tool cannot reach its service until the operator allows it",
			"allow_private: true on the tool in the tools file", "TOOLSVC_NET_ALLOW_HOSTS", "TOOLSVC_NET_ALLOW_CIDRS",
		}},
		{"private address refused", "http://10.1.2.3:9/x", false, []string{"the network guard refused the request to the tool's own URL", "10.1.2.3", "TOOLSVC_NET_ALLOW_CIDRS"}},
		{"metadata address refused", "http://169.254.169.254/latest", false, []string{"the network guard refused", "169.254.169.254", "tell the user"}},
		{"redirect to another host", srv.URL + "/away", true, []string{"redirected to another host (localhost)", "Next: tell the user the tool's service moved; the operator should change the tool's url."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entry := "tools:\n  - {name: t, description: d, http: {url: '" + tc.url + "'}, timeout: 5s}\n"
			if tc.allowPrivate {
				entry = strings.Replace(entry, "'}", "', allow_private: true}", 1)
			}
			f, err := Parse("t.yaml", []byte(entry), Options{})
			if err != nil {
				t.Fatal(err)
			}
			g, _ := netguard.New(netguard.Options{})
			h, err := NewHTTP(f.Tools[0], HTTPDeps{Guard: g, DefaultMaxOutput: 100, GuardAllowing: func(host string) (*netguard.Guard, error) {
				return netguard.New(AllowHost(netguard.Options{}, host))
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Execute(context.Background(), json.RawMessage(`{}`))
			var te *toolerr.Error
			if !errors.As(err, &te) || te.Code != toolerr.PolicyDenied {
				t.Fatalf("got %v, want a policy_denied error", err)
			}
			msg := te.Message
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s\nlacks %q", msg, w)
				}
			}
			if n := strings.Count(msg, "Next:"); n != 1 {
				t.Errorf("%d next steps: %s", n, msg)
			}
			for _, bad := range []string{"public http(s) URL instead", "pass an", "Refused: "} {
				if strings.Contains(msg, bad) {
					t.Errorf("%s\ntells the model %q", msg, bad)
				}
			}
		})
	}
}
