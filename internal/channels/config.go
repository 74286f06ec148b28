package channels

import (
	"strconv"

	"github.com/countbot/toolsvc/internal/config"
)

// FromConfig builds a Manager with every account the configuration names.
// An empty Manager means no channel is configured. config.Validate has
// checked that the per-account variables agree.
func FromConfig(c config.Config, o Options) *Manager {
	m := NewManager()
	for _, a := range c.FeishuAppID {
		secret, _ := c.FeishuAppSecret.Lookup(a.Name)
		base, ok := c.FeishuBaseURL.Lookup(a.Name)
		if !ok {
			base, _ = c.FeishuBaseURL.Lookup(config.DefaultAccount)
		}
		if base == "" {
			base = "https://open.feishu.cn"
		}
		m.Add("feishu", a.Name, NewFeishu(FeishuAccount{AppID: a.Value, AppSecret: secret, BaseURL: base}, o))
	}
	for _, a := range c.QQAppID {
		secret, _ := c.QQAppSecret.Lookup(a.Name)
		m.Add("qq", a.Name, NewQQ(QQAccount{AppID: a.Value, AppSecret: secret, BaseURL: c.QQBaseURL, TokenURL: c.QQTokenURL}, o))
	}
	for _, a := range c.DingTalkClientID {
		secret, _ := c.DingTalkClientSecret.Lookup(a.Name)
		code, _ := c.DingTalkRobotCode.Lookup(a.Name)
		m.Add("dingtalk", a.Name, NewDingTalk(DingTalkAccount{ClientID: a.Value, ClientSecret: secret, RobotCode: code, APIURL: c.DingTalkAPIURL, OAPIURL: c.DingTalkOAPIURL}, o))
	}
	for _, a := range c.WeComCorpID {
		secret, _ := c.WeComSecret.Lookup(a.Name)
		agent, _ := c.WeComAgentID.Lookup(a.Name)
		id, _ := strconv.ParseInt(agent, 10, 64)
		m.Add("wecom", a.Name, NewWeCom(WeComAccount{CorpID: a.Value, Secret: secret, AgentID: id, BaseURL: c.WeComBaseURL}, o))
	}
	for _, a := range c.WeComWebhookURL {
		m.Add("wecom", a.Name, NewWeCom(WeComAccount{WebhookURL: a.Value}, o))
	}
	for _, a := range c.TelegramBotToken {
		m.Add("telegram", a.Name, NewTelegram(TelegramAccount{Token: a.Value, BaseURL: c.TelegramBaseURL}, o))
	}
	for _, a := range c.DiscordBotToken {
		m.Add("discord", a.Name, NewDiscord(DiscordAccount{Token: a.Value, BaseURL: c.DiscordBaseURL}, o))
	}
	for _, a := range c.DiscordWebhookURL {
		m.Add("discord", a.Name, NewDiscord(DiscordAccount{WebhookURL: a.Value}, o))
	}
	for _, a := range c.SlackBotToken {
		m.Add("slack", a.Name, NewSlack(SlackAccount{Token: a.Value, BaseURL: c.SlackBaseURL}, o))
	}
	for _, a := range c.WebhookURL {
		secret, _ := c.WebhookSecret.Lookup(a.Name)
		m.Add("webhook", a.Name, NewWebhook(WebhookAccount{URL: a.Value, Secret: secret}, o))
	}
	return m
}
