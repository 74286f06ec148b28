package agent

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errorDetail is one of the details of a Google API error (Gemini's
// OpenAI compatibility passes them on): a google.rpc.RetryInfo with
// retryDelay, a google.rpc.QuotaFailure with the quotas that were hit
// (https://cloud.google.com/apis/design/errors#error_details).
type errorDetail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
	Violations []struct {
		QuotaID    string `json:"quotaId"`
		QuotaValue string `json:"quotaValue"`
	} `json:"violations"`
}

// retryDelay returns the error's RetryInfo delay, if it has one.
func (e *wireError) retryDelay() (time.Duration, bool) {
	for _, d := range e.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "" {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v >= 0 {
				return v, true
			}
		}
	}
	return 0, false
}

// lasting says whether a Google quota error is about a quota that a
// short wait does not refill: a daily one (quotaId ...PerDay...), or one
// of 0, which the project's tier does not have at all for the model.
func (e *wireError) lasting() bool {
	for _, d := range e.Details {
		for _, v := range d.Violations {
			if strings.Contains(v.QuotaID, "PerDay") || v.QuotaValue == "0" {
				return true
			}
		}
	}
	return strings.Contains(e.Message, "limit: 0,")
}

// errorsOf reads an error body: {"error":{...}} as OpenAI writes it, or
// [{"error":{...}}] as Gemini's OpenAI compatibility does.
func errorsOf(data []byte) []*wireError {
	var one struct{ Error *wireError }
	if json.Unmarshal(data, &one) == nil && one.Error != nil {
		return []*wireError{one.Error}
	}
	var list []struct{ Error *wireError }
	var out []*wireError
	if json.Unmarshal(data, &list) == nil {
		for _, e := range list {
			if e.Error != nil {
				out = append(out, e.Error)
			}
		}
	}
	return out
}

// statusWait is once's wait for a reply with status code, header h and
// body data, after the retries allowed: -1 when it is final (a status
// other than 429 and 5xx, or a spent quota, see isQuota); otherwise the
// wait the server asks for (serverWait), or 0 for the client's backoff.
func statusWait(code int, h http.Header, data []byte) time.Duration {
	if code != http.StatusTooManyRequests && code < 500 {
		return -1
	}
	if code == http.StatusTooManyRequests {
		for _, e := range errorsOf(data) {
			if isQuota(e) {
				return -1
			}
		}
	}
	if d := headerWait(h); d > 0 {
		return d
	}
	if code != http.StatusTooManyRequests {
		return 0
	}
	for _, e := range errorsOf(data) {
		if d, ok := e.retryDelay(); ok {
			return max(d, time.Millisecond)
		}
	}
	return resetWait(h, false)
}

// headerWait reads the wait a server names in its headers: Azure
// OpenAI's retry-after-ms (and x-ms-retry-after-ms), finer than the
// Retry-After it sends beside it, then Retry-After (seconds or a date).
// 0: none.
func headerWait(h http.Header) time.Duration {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if n, err := strconv.ParseFloat(strings.TrimSpace(h.Get(k)), 64); err == nil && n >= 0 {
			return min(max(time.Duration(n*float64(time.Millisecond)), time.Millisecond), maxRetryAfter)
		}
	}
	return retryAfter(h.Get("Retry-After"))
}

// resetWait reads OpenAI's rate-limit headers (Groq, Azure OpenAI and
// others send the same): for requests and tokens, what remains of the
// limit (x-ratelimit-remaining-*) and the time until it resets
// (x-ratelimit-reset-*, such as "1s", "6m0s" or "7.66s"). It returns the
// longest reset among the limits with nothing left, capped at
// maxRetryAfter; 0 when none is spent. With any, also a limit whose
// remaining count is absent counts as spent (a 429 says one is).
func resetWait(h http.Header, strict bool) time.Duration {
	var wait time.Duration
	for _, kind := range []string{"requests", "tokens"} {
		rem := strings.TrimSpace(h.Get("x-ratelimit-remaining-" + kind))
		if rem != "0" && (strict || rem != "") {
			continue
		}
		if d := resetDuration(h.Get("x-ratelimit-reset-" + kind)); d > wait {
			wait = d
		}
	}
	return min(wait, maxRetryAfter)
}

// resetDuration reads a reset time: a Go-style duration ("2m59.56s",
// "20ms") or a number of seconds. 0: none or unreadable.
func resetDuration(v string) time.Duration {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	return 0
}

// pacer holds the next request back while a limit the last reply said
// was spent resets, so that the request is not refused with a 429.
type pacer struct {
	mu        sync.Mutex
	notBefore time.Time
}

// saw notes the rate-limit headers of a successful reply.
func (p *pacer) saw(h http.Header) {
	if d := resetWait(h, true); d > 0 {
		p.mu.Lock()
		p.notBefore = time.Now().Add(d)
		p.mu.Unlock()
	}
}

// wait returns how long the next request should wait; 0: none.
func (p *pacer) wait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Until(p.notBefore)
}
