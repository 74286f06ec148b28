package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// geminiLimit is Gemini's 429 for a spent limit, as its OpenAI
// compatibility sends it (a list around the error of its REST API):
// RESOURCE_EXHAUSTED with "You exceeded your current quota", the quota
// that was hit in a google.rpc.QuotaFailure and when to retry in a
// google.rpc.RetryInfo (https://ai.google.dev/gemini-api/docs/rate-limits,
// https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes, the
// detail types at https://cloud.google.com/apis/design/errors#error_details).
func geminiLimit(quotaID, value, delay string) string {
	return `[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"` + quotaID + `","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"` + value + `"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}]`
}

// TestClientRateLimits checks which 429s are waited out, and for how
// long, by what each platform documents it sends.
func TestClientRateLimits(t *testing.T) {
	ok := agenttest.Final("fine")
	tests := []struct {
		name      string
		script    []agenttest.Response
		wantErr   string
		wantWaits []time.Duration
	}{
		// Gemini's per-minute limit: the same words as a spent quota, and
		// a delay after which it lifts.
		{"Gemini per-minute limit waits retryDelay", []agenttest.Response{{Status: 429, Body: geminiLimit("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10", "22s")}, ok}, "", []time.Duration{22 * time.Second}},
		{"Gemini per-minute limit, fractional retryDelay", []agenttest.Response{{Status: 429, Body: strings.TrimSuffix(strings.TrimPrefix(geminiLimit("GenerateContentInputTokensPerModelPerMinute-FreeTier", "250000", "10.689924287s"), "["), "]")}, ok}, "", []time.Duration{10689924287}},
		// A daily quota, or none at all for the model: waiting does not help.
		{"Gemini daily quota fails at once", []agenttest.Response{{Status: 429, Body: geminiLimit("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250", "22s")}, ok}, "HTTP 429", nil},
		{"Gemini quota 0 for the model fails at once", []agenttest.Response{{Status: 429, Body: geminiLimit("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "0", "37s")}, ok}, "HTTP 429", nil},
		{"Gemini delay of hours fails at once", []agenttest.Response{{Status: 429, Body: geminiLimit("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10", "37025s")}, ok}, "HTTP 429", nil},
		// Azure OpenAI sends retry-after-ms beside Retry-After; the
		// milliseconds are the finer
		// (https://learn.microsoft.com/azure/ai-foundry/openai/how-to/quota#understanding-rate-limits).
		{"Azure retry-after-ms", []agenttest.Response{{Status: 429, Header: map[string]string{"Retry-After": "2", "retry-after-ms": "1500"}, Body: `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 2 seconds."}}`}, ok}, "", []time.Duration{1500 * time.Millisecond}},
		// OpenAI and Groq: x-ratelimit-remaining-* and the time until
		// each resets (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers,
		// https://console.groq.com/docs/rate-limits#handling-rate-limits).
		{"x-ratelimit-reset-requests when requests ran out", []agenttest.Response{{Status: 429, Header: map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20s", "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "50ms"}, Body: `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`}, ok}, "", []time.Duration{20 * time.Second}},
		{"Groq x-ratelimit-reset-tokens when tokens ran out", []agenttest.Response{{Status: 429, Header: map[string]string{"x-ratelimit-remaining-requests": "14370", "x-ratelimit-reset-requests": "2m59.56s", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "7.66s"}, Body: `{"error":{"message":"Rate limit reached for model","type":"tokens","code":"rate_limit_exceeded"}}`}, ok}, "", []time.Duration{7660 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []func(agenttest.Request) agenttest.Response
			for _, r := range tt.script {
				steps = append(steps, agenttest.Reply(r))
			}
			srv := agenttest.New(t, steps...)
			rec := &recorder{}
			_, err := newClient(srv, rec).Chat(context.Background(), []agent.Message{{Role: "user", Content: "go"}}, nil)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(rec.waits, tt.wantWaits) {
				t.Errorf("waits %v, want %v", rec.waits, tt.wantWaits)
			}
		})
	}
}

// TestClientPacesBySpentLimit: a reply that says a limit is spent
// (x-ratelimit-remaining-requests 0) makes the next request wait until it
// resets, instead of earning a 429
// (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
func TestClientPacesBySpentLimit(t *testing.T) {
	spent := agenttest.Final("fine")
	spent.Header = map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s"}
	srv := agenttest.New(t, agenttest.Reply(spent), agenttest.Reply(agenttest.Final("fine")))
	rec := &recorder{}
	c := newClient(srv, rec)
	for range 2 {
		if _, err := c.Chat(context.Background(), []agent.Message{{Role: "user", Content: "go"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.waits) != 1 || rec.waits[0] <= 2*time.Second || rec.waits[0] > 3*time.Second {
		t.Fatalf("waits %v, want one of about 3s before the second request", rec.waits)
	}
}
