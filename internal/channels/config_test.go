package channels

import (
	"slices"
	"testing"
)

func TestFromConfig(t *testing.T) {
	if m := FromConfig(Config{}, Options{}); !m.Empty() {
		t.Fatalf("no accounts, yet channels: %v", m.Channels())
	}
	c := Config{
		Feishu: map[string]FeishuAccount{
			"default": {AppID: "cli_a", AppSecret: "s1", BaseURL: "https://open.feishu.cn"},
			"ops":     {AppID: "cli_b", AppSecret: "s2", BaseURL: "https://open.larksuite.com"},
		},
		QQ:       map[string]QQAccount{"default": {AppID: "1", AppSecret: "s"}},
		DingTalk: map[string]DingTalkAccount{"default": {ClientID: "d", ClientSecret: "s"}},
		WeCom: map[string]WeComAccount{
			"app":     {CorpID: "ww", Secret: "s", AgentID: 1000002},
			"default": {WebhookURL: "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k"},
		},
		Telegram: map[string]TelegramAccount{"default": {Token: "1:t"}},
		Discord:  map[string]DiscordAccount{"default": {WebhookURL: "https://discord.com/api/webhooks/1/t"}},
		Slack:    map[string]SlackAccount{"default": {Token: "xoxb-1"}},
		Webhook:  map[string]WebhookAccount{"default": {URL: "http://127.0.0.1:9/in"}},
	}
	m := FromConfig(c, Options{})
	if got := m.Channels(); !slices.Equal(got, Known) {
		t.Errorf("channels %v, want %v", got, Known)
	}
	if got := m.Accounts("feishu"); !slices.Equal(got, []string{"default", "ops"}) {
		t.Errorf("feishu accounts %v", got)
	}
	if got := m.Accounts("wecom"); !slices.Equal(got, []string{"app", "default"}) {
		t.Errorf("wecom accounts %v", got)
	}
	s, _, err := m.Sender(Target{Channel: "feishu", Account: "ops"})
	if err != nil || s.(*Feishu).acct != c.Feishu["ops"] {
		t.Errorf("ops app: %+v %v", s, err)
	}
	if s, _, _ := m.Sender(Target{Channel: "wecom", Account: "app"}); s.(*WeCom).acct.AgentID != 1000002 || s.(*WeCom).robot() {
		t.Errorf("wecom app %+v", s)
	}
	if s, _, _ := m.Sender(Target{Channel: "wecom", Account: "default"}); !s.(*WeCom).robot() {
		t.Errorf("wecom robot %+v", s)
	}
}
