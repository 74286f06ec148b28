package app

import (
	"testing"

	"github.com/countbot/toolsvc/internal/channels"
	"github.com/countbot/toolsvc/internal/config"
)

// TestChannelsConfig: the per-account variables of a channel are joined
// by account name, and a Feishu app without a base URL of its own takes
// the default account's.
func TestChannelsConfig(t *testing.T) {
	if got := channels.FromConfig(channelsConfig(config.Channels{}), channels.Options{}); !got.Empty() {
		t.Fatalf("no variables, yet channels: %v", got.Channels())
	}
	var c config.Channels
	set := func(d config.Decoder, v string) {
		if err := d.Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	set(&c.FeishuAppID, "cli_a,ops=cli_b,eu=cli_c")
	set(&c.FeishuAppSecret, "s1,ops=s2,eu=s3")
	set(&c.FeishuBaseURL, "https://open.feishu.cn,ops=https://open.larksuite.com")
	set(&c.QQAppID, "1")
	set(&c.QQAppSecret, "s")
	c.QQBaseURL, c.QQTokenURL = "https://qq.example", "https://qq.example/token"
	set(&c.DingTalkClientID, "d")
	set(&c.DingTalkClientSecret, "s")
	set(&c.DingTalkRobotCode, "robot")
	set(&c.WeComCorpID, "app=ww")
	set(&c.WeComSecret, "app=s")
	set(&c.WeComAgentID, "app=1000002")
	set(&c.WeComWebhookURL, "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k")
	set(&c.TelegramBotToken, "1:t")
	set(&c.DiscordBotToken, "bot=tok")
	set(&c.DiscordWebhookURL, "https://discord.com/api/webhooks/1/t")
	set(&c.SlackBotToken, "xoxb-1")
	set(&c.WebhookURL, "http://127.0.0.1:9/in,b=http://127.0.0.1:9/b")
	set(&c.WebhookSecret, "b=hmac")
	got := channelsConfig(c)
	want := map[string]bool{
		"feishu default": got.Feishu["default"] == channels.FeishuAccount{AppID: "cli_a", AppSecret: "s1", BaseURL: "https://open.feishu.cn"},
		"feishu ops":     got.Feishu["ops"] == channels.FeishuAccount{AppID: "cli_b", AppSecret: "s2", BaseURL: "https://open.larksuite.com"},
		"feishu eu":      got.Feishu["eu"] == channels.FeishuAccount{AppID: "cli_c", AppSecret: "s3", BaseURL: "https://open.feishu.cn"},
		"qq":             got.QQ["default"] == channels.QQAccount{AppID: "1", AppSecret: "s", BaseURL: "https://qq.example", TokenURL: "https://qq.example/token"},
		"dingtalk":       got.DingTalk["default"].RobotCode == "robot" && got.DingTalk["default"].ClientSecret == "s",
		"wecom app":      got.WeCom["app"] == channels.WeComAccount{CorpID: "ww", Secret: "s", AgentID: 1000002},
		"wecom robot":    got.WeCom["default"].WebhookURL != "" && got.WeCom["default"].CorpID == "",
		"telegram":       got.Telegram["default"].Token == "1:t",
		"discord":        got.Discord["bot"].Token == "tok" && got.Discord["default"].WebhookURL != "",
		"slack":          got.Slack["default"].Token == "xoxb-1",
		"webhook":        got.Webhook["b"] == channels.WebhookAccount{URL: "http://127.0.0.1:9/b", Secret: "hmac"} && got.Webhook["default"].Secret == "",
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("%s: %+v", name, got)
		}
	}
	if m := channels.FromConfig(got, channels.Options{}); len(m.Channels()) != len(channels.Known) {
		t.Errorf("channels %v, want %v", m.Channels(), channels.Known)
	}
}
