package channels

import (
	"slices"
	"testing"

	"github.com/countbot/toolsvc/internal/config"
)

func TestFromConfig(t *testing.T) {
	if m := FromConfig(config.Config{}, Options{}); !m.Empty() {
		t.Fatalf("no variables, yet channels: %v", m.Channels())
	}
	var c config.Config
	set := func(d interface{ Decode(string) error }, v string) {
		if err := d.Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	set(&c.FeishuAppID, "cli_a,ops=cli_b")
	set(&c.FeishuAppSecret, "s1,ops=s2")
	set(&c.FeishuBaseURL, "https://open.feishu.cn,ops=https://open.larksuite.com")
	set(&c.QQAppID, "1")
	set(&c.QQAppSecret, "s")
	set(&c.DingTalkClientID, "d")
	set(&c.DingTalkClientSecret, "s")
	set(&c.WeComCorpID, "app=ww")
	set(&c.WeComSecret, "app=s")
	set(&c.WeComAgentID, "app=1000002")
	set(&c.WeComWebhookURL, "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k")
	set(&c.TelegramBotToken, "1:t")
	set(&c.DiscordWebhookURL, "https://discord.com/api/webhooks/1/t")
	set(&c.SlackBotToken, "xoxb-1")
	set(&c.WebhookURL, "http://127.0.0.1:9/in")
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
	if err != nil || s.(*Feishu).acct.BaseURL != "https://open.larksuite.com" || s.(*Feishu).acct.AppSecret != "s2" {
		t.Errorf("ops app: %+v %v", s, err)
	}
	if s, _, _ := m.Sender(Target{Channel: "wecom", Account: "app"}); s.(*WeCom).acct.AgentID != 1000002 || s.(*WeCom).robot() {
		t.Errorf("wecom app %+v", s)
	}
}
