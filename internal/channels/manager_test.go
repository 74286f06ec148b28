package channels

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestTokenCacheEarlyRefresh: a token is used until the last fifth of its
// life (at most five minutes before it lapses), then fetched anew; a
// dropped token is fetched at once; a failed fetch is not cached.
func TestTokenCacheEarlyRefresh(t *testing.T) {
	clk := newClock()
	fetches := 0
	fail := false
	c := tokenCache{now: clk.Now, fetch: func(context.Context) (string, time.Duration, error) {
		if fail {
			return "", 0, errors.New("down")
		}
		fetches++
		return "tok" + string(rune('0'+fetches)), 2 * time.Hour, nil
	}}
	ctx := context.Background()
	get := func() string {
		tok, err := c.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// Two calls, one fetch: the second is served from the cache.
	if first, second := get(), get(); first != "tok1" || second != "tok1" || fetches != 1 {
		t.Fatalf("fetches %d", fetches)
	}
	clk.Advance(2*time.Hour - 5*time.Minute - time.Second)
	if get() != "tok1" {
		t.Error("refreshed more than five minutes early")
	}
	clk.Advance(2 * time.Second)
	if get() != "tok2" {
		t.Error("not refreshed in the last five minutes")
	}
	c.drop("tok1") // an old token: no effect
	if get() != "tok2" {
		t.Error("dropping an old token dropped the current one")
	}
	c.drop("tok2")
	fail = true
	if _, err := c.get(ctx); err == nil {
		t.Error("a failed fetch returned a token")
	}
	fail = false
	if get() != "tok3" {
		t.Error("not fetched after drop")
	}
	// A short-lived token is renewed in its last fifth.
	short := tokenCache{now: clk.Now, fetch: func(context.Context) (string, time.Duration, error) { fetches++; return "s", 100 * time.Second, nil }}
	n := fetches
	_, _ = short.get(ctx)
	clk.Advance(79 * time.Second)
	_, _ = short.get(ctx)
	clk.Advance(2 * time.Second)
	_, _ = short.get(ctx)
	if fetches-n != 2 {
		t.Errorf("short token fetched %d times, want 2", fetches-n)
	}
}

func TestRetryAfterHint(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		status int
		header string
		want   time.Duration
		ok     bool
	}{
		{429, "3", 3 * time.Second, true},
		{429, "0.5", 500 * time.Millisecond, true},
		{429, "", time.Second, true},
		{429, now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second, true},
		{429, "99999", 10 * time.Minute, true},
		{429, "-4", time.Second, true}, // nonsense: the default wait
		{503, "3", 0, false},
	} {
		r := &reply{Status: c.status, Header: http.Header{"Retry-After": {c.header}}}
		if got, ok := retryAfter(r, now); got != c.want || ok != c.ok {
			t.Errorf("%d %q: %v %v, want %v %v", c.status, c.header, got, ok, c.want, c.ok)
		}
	}
}
