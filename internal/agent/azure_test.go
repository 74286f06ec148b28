package agent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// fakeAzure answers as Azure OpenAI's data-plane inference API does
// (https://learn.microsoft.com/azure/ai-foundry/openai/reference#chat-completions):
// POST {endpoint}/openai/deployments/{deployment-id}/chat/completions
// with the api-version query parameter (required) and the key in the
// api-key header, or a Microsoft Entra token as a bearer; and the v1 API
// (https://learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle)
// at {endpoint}/openai/v1/chat/completions, without api-version. A key
// sent as a bearer on the classic route is refused as Azure does, 401.
type fakeAzure struct {
	URL, key string
	mu       sync.Mutex
	seen     []string // method path?query of each request
}

func newFakeAzure(t *testing.T, key string) *fakeAzure {
	f := &fakeAzure{key: key}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *fakeAzure) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, r.Method+" "+r.URL.RequestURI())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	denied := `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`
	switch {
	case r.Method != http.MethodPost:
		http.Error(w, `{"error":{"code":"404","message":"Resource not found"}}`, http.StatusNotFound)
	case r.URL.Path == "/openai/deployments/gpt-4o-prod/chat/completions":
		if r.URL.Query().Get("api-version") == "" {
			http.Error(w, `{"error":{"code":"404","message":"Resource not found"}}`, http.StatusNotFound)
			return
		}
		if r.Header.Get("api-key") != f.key {
			http.Error(w, denied, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, agenttest.Final("from the deployment").Body)
	case r.URL.Path == "/openai/v1/chat/completions":
		if r.Header.Get("Authorization") != "Bearer "+f.key && r.Header.Get("api-key") != f.key {
			http.Error(w, denied, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, agenttest.Final("from v1").Body)
	default:
		http.Error(w, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`, http.StatusNotFound)
	}
}

// TestClientAzureRoutes: a base URL that names a deployment
// (/openai/deployments/{d}) is Azure's classic route: /chat/completions
// is appended to the path, api-version kept from the URL or set to the
// latest GA one, and the key goes in api-key. A base URL of the v1 API is
// an OpenAI-compatible endpoint like any other.
func TestClientAzureRoutes(t *testing.T) {
	const key = "azure-key-0123456789abcdef"
	tests := []struct {
		base, want, wantReq string
	}{
		{"/openai/deployments/gpt-4o-prod", "from the deployment", "POST /openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"},
		{"/openai/deployments/gpt-4o-prod/?api-version=2025-04-01-preview", "from the deployment", "POST /openai/deployments/gpt-4o-prod/chat/completions?api-version=2025-04-01-preview"},
		{"/openai/v1", "from v1", "POST /openai/v1/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			az := newFakeAzure(t, key)
			c := agent.NewClient(agent.ClientOptions{BaseURL: az.URL + tt.base, APIKey: key, Model: "gpt-4o", Timeout: 5 * time.Second, MaxRetries: -1})
			reply, err := c.Chat(context.Background(), []agent.Message{{Role: "user", Content: "go"}}, nil)
			if err != nil || reply.Message.Content != tt.want {
				t.Fatalf("reply %q, error %v; want %q", reply.Message.Content, err, tt.want)
			}
			if len(az.seen) != 1 || az.seen[0] != tt.wantReq {
				t.Errorf("requests %v, want %q", az.seen, tt.wantReq)
			}
			if err != nil && strings.Contains(err.Error(), key) {
				t.Errorf("the error carries the key: %v", err)
			}
		})
	}
}
