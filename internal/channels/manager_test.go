package channels

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

func TestSplitBytes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want []string
	}{
		{"", 5, []string{""}},
		{"abc", 5, []string{"abc"}},
		{"abcdefgh", 3, []string{"abc", "def", "gh"}},
		{"季度数据", 7, []string{"季度", "数据"}}, // 3 bytes a rune: never cut inside one
		{"季度数据", 6, []string{"季度", "数据"}},
		{"ab\ncdefg", 6, []string{"ab\ncde", "fg"}}, // the break is in the first half: a plain cut
		{"abcd\nefgh", 6, []string{"abcd\n", "efgh"}},
		{"one two three", 9, []string{"one two ", "three"}},
	} {
		got := splitBytes(c.s, c.n)
		if !slices.Equal(got, c.want) {
			t.Errorf("splitBytes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		for _, p := range got {
			if len(p) > c.n || !utf8.ValidString(p) {
				t.Errorf("part %q: %d bytes, valid %v", p, len(p), utf8.ValidString(p))
			}
		}
	}
}

func TestMP4Duration(t *testing.T) {
	data := mp4Data(61)
	if d, err := mp4Duration(bytes.NewReader(data), int64(len(data))); err != nil || d != 61*time.Second {
		t.Errorf("v0: %v %v", d, err)
	}
	// Version 1: 64-bit times; and a 64-bit box size (size field 1).
	mvhd := make([]byte, 112)
	mvhd[0] = 1
	binary.BigEndian.PutUint32(mvhd[20:], 90000)
	binary.BigEndian.PutUint64(mvhd[24:], 90000*5/2)
	inner := append(binary.BigEndian.AppendUint32(nil, uint32(8+len(mvhd))), "mvhd"...)
	inner = append(inner, mvhd...)
	moov := binary.BigEndian.AppendUint32(nil, 1)
	moov = append(moov, "moov"...)
	moov = binary.BigEndian.AppendUint64(moov, uint64(16+len(inner)))
	moov = append(moov, inner...)
	if d, err := mp4Duration(bytes.NewReader(moov), int64(len(moov))); err != nil || d != 2500*time.Millisecond {
		t.Errorf("v1: %v %v", d, err)
	}
	for name, b := range map[string][]byte{"empty": nil, "text": []byte("not a movie at all"), "cut": data[:len(data)-10]} {
		if _, err := mp4Duration(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestUserAgent: Discord's documented form, toolsvc's name and version
// for the others.
func TestUserAgent(t *testing.T) {
	if got := userAgent("discord", "v1.4.0"); got != "DiscordBot (https://github.com/countbot/toolsvc, v1.4.0)" || !discordUA.MatchString(got) {
		t.Errorf("discord: %q", got)
	}
	for _, ch := range []string{"telegram", "slack", "feishu", "qq", "dingtalk", "wecom", "webhook"} {
		if got := userAgent(ch, ""); got != "toolsvc/devel (+https://github.com/countbot/toolsvc)" {
			t.Errorf("%s: %q", ch, got)
		}
	}
}

// TestCheckFileEmpty: an empty file is refused before upload on every
// channel, with a reason a model can act on.
func TestCheckFileEmpty(t *testing.T) {
	m := FromConfig(Config{
		Feishu: map[string]FeishuAccount{"default": {}}, QQ: map[string]QQAccount{"default": {}},
		DingTalk: map[string]DingTalkAccount{"default": {}}, WeCom: map[string]WeComAccount{"default": {}},
		Telegram: map[string]TelegramAccount{"default": {}}, Discord: map[string]DiscordAccount{"default": {}},
		Slack: map[string]SlackAccount{"default": {}}, Webhook: map[string]WebhookAccount{"default": {}},
	}, Options{})
	empty := &File{Name: "e.pdf", Ext: "pdf", Kind: Document, Content: bytes.NewReader(nil)}
	for _, ch := range Known {
		s, _, err := m.Sender(Target{Channel: ch})
		if err != nil {
			t.Fatal(err)
		}
		if r := CheckFile(s, empty); !strings.Contains(r, "empty") || !strings.Contains(r, "Next:") {
			t.Errorf("%s: %q", ch, r)
		}
	}
}
