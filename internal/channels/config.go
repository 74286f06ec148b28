package channels

// Config is every chat account the service sends through, by channel and
// account name. A WeCom account is an app or a group robot, a Discord
// account a bot or a channel webhook, by the fields it sets. An empty
// Config configures no channel.
type Config struct {
	Feishu   map[string]FeishuAccount
	QQ       map[string]QQAccount
	DingTalk map[string]DingTalkAccount
	WeCom    map[string]WeComAccount
	Telegram map[string]TelegramAccount
	Discord  map[string]DiscordAccount
	Slack    map[string]SlackAccount
	Webhook  map[string]WebhookAccount
}

// FromConfig builds a Manager with every account c names. An empty
// Manager means no channel is configured.
func FromConfig(c Config, o Options) *Manager {
	m := NewManager()
	addAll(m, "feishu", c.Feishu, func(a FeishuAccount) Sender { return NewFeishu(a, o) })
	addAll(m, "qq", c.QQ, func(a QQAccount) Sender { return NewQQ(a, o) })
	addAll(m, "dingtalk", c.DingTalk, func(a DingTalkAccount) Sender { return NewDingTalk(a, o) })
	addAll(m, "wecom", c.WeCom, func(a WeComAccount) Sender { return NewWeCom(a, o) })
	addAll(m, "telegram", c.Telegram, func(a TelegramAccount) Sender { return NewTelegram(a, o) })
	addAll(m, "discord", c.Discord, func(a DiscordAccount) Sender { return NewDiscord(a, o) })
	addAll(m, "slack", c.Slack, func(a SlackAccount) Sender { return NewSlack(a, o) })
	addAll(m, "webhook", c.Webhook, func(a WebhookAccount) Sender { return NewWebhook(a, o) })
	return m
}

// addAll adds a sender for each account of channel.
func addAll[A any](m *Manager, channel string, accounts map[string]A, build func(A) Sender) {
	for name, a := range accounts {
		m.Add(channel, name, build(a))
	}
}
