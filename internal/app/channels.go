package app

import (
	"strconv"

	"github.com/countbot/toolsvc/internal/channels"
	"github.com/countbot/toolsvc/internal/config"
)

// channelsConfig joins the per-account variables of each chat channel
// (an ID here, its secret there, both named by account) into one account
// each. config.Validate has checked that they name the same accounts.
func channelsConfig(c config.Channels) channels.Config {
	out := channels.Config{
		Feishu: map[string]channels.FeishuAccount{}, QQ: map[string]channels.QQAccount{},
		DingTalk: map[string]channels.DingTalkAccount{}, WeCom: map[string]channels.WeComAccount{},
		Telegram: map[string]channels.TelegramAccount{}, Discord: map[string]channels.DiscordAccount{},
		Slack: map[string]channels.SlackAccount{}, Webhook: map[string]channels.WebhookAccount{},
	}
	for _, a := range c.FeishuAppID {
		secret, _ := c.FeishuAppSecret.Lookup(a.Name)
		base, ok := c.FeishuBaseURL.Lookup(a.Name)
		if !ok {
			base, _ = c.FeishuBaseURL.Lookup(config.DefaultAccount)
		}
		if base == "" {
			base = "https://open.feishu.cn"
		}
		out.Feishu[a.Name] = channels.FeishuAccount{AppID: a.Value, AppSecret: secret, BaseURL: base}
	}
	for _, a := range c.QQAppID {
		secret, _ := c.QQAppSecret.Lookup(a.Name)
		out.QQ[a.Name] = channels.QQAccount{AppID: a.Value, AppSecret: secret, BaseURL: c.QQBaseURL, TokenURL: c.QQTokenURL}
	}
	for _, a := range c.DingTalkClientID {
		secret, _ := c.DingTalkClientSecret.Lookup(a.Name)
		code, _ := c.DingTalkRobotCode.Lookup(a.Name)
		out.DingTalk[a.Name] = channels.DingTalkAccount{ClientID: a.Value, ClientSecret: secret, RobotCode: code, APIURL: c.DingTalkAPIURL, OAPIURL: c.DingTalkOAPIURL}
	}
	for _, a := range c.WeComCorpID {
		secret, _ := c.WeComSecret.Lookup(a.Name)
		agent, _ := c.WeComAgentID.Lookup(a.Name)
		id, _ := strconv.ParseInt(agent, 10, 64)
		out.WeCom[a.Name] = channels.WeComAccount{CorpID: a.Value, Secret: secret, AgentID: id, BaseURL: c.WeComBaseURL}
	}
	for _, a := range c.WeComWebhookURL {
		out.WeCom[a.Name] = channels.WeComAccount{WebhookURL: a.Value}
	}
	for _, a := range c.TelegramBotToken {
		out.Telegram[a.Name] = channels.TelegramAccount{Token: a.Value, BaseURL: c.TelegramBaseURL}
	}
	for _, a := range c.DiscordBotToken {
		out.Discord[a.Name] = channels.DiscordAccount{Token: a.Value, BaseURL: c.DiscordBaseURL}
	}
	for _, a := range c.DiscordWebhookURL {
		out.Discord[a.Name] = channels.DiscordAccount{WebhookURL: a.Value}
	}
	for _, a := range c.SlackBotToken {
		out.Slack[a.Name] = channels.SlackAccount{Token: a.Value, BaseURL: c.SlackBaseURL}
	}
	for _, a := range c.WebhookURL {
		secret, _ := c.WebhookSecret.Lookup(a.Name)
		out.Webhook[a.Name] = channels.WebhookAccount{URL: a.Value, Secret: secret}
	}
	return out
}
