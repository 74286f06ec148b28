// Package config reads toolsvc's configuration from TOOLSVC_* environment
// variables, with a default and a description for each, and validates it.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/redact"
)

// Prefix is the prefix of every variable.
const Prefix = "TOOLSVC"

// Config is the whole configuration. Every field has an envconfig name, a
// default and a description; `toolsvc -h` prints them.
type Config struct {
	// Service
	Addr               string        `envconfig:"ADDR" default:"127.0.0.1:8080" desc:"host:port to listen on"`
	Workspace          string        `envconfig:"WORKSPACE" default:"./workspace" desc:"folder the tools work in; created if missing"`
	DataDir            string        `envconfig:"DATA_DIR" default:"./data" desc:"folder for the service's own data (audit_logs/); never visible to tools; must be outside the workspace (and not contain it)"`
	MinFreeBytes       int64         `envconfig:"MIN_FREE_BYTES" default:"67108864" desc:"free space the workspace's and the data folder's file systems need for /readyz to report ready (0: no check)"`
	APIKeys            APIKeys       `envconfig:"API_KEYS" desc:"comma-separated bearer keys, each name=key or a bare key (named key- and 8 hex digits of its SHA-256); when set, every route but /healthz, /readyz and CORS preflight needs one (/metrics, /mcp and /openapi.json included). Sub-agent tasks belong to the key that started them (another key gets 404), send_message conversations to the key and the session. Logs and audit records name the key, never show it"`
	AdminKeys          APIKeys       `envconfig:"ADMIN_KEYS" desc:"comma-separated bearer keys, name=key or bare, that also see, follow and cancel every key's sub-agent tasks (those started before keys were set included); they need no entry in API_KEYS"`
	AllowInsecure      bool          `envconfig:"ALLOW_INSECURE" default:"false" desc:"allow listening on a non-loopback address without API keys"`
	RestrictWorkspace  bool          `envconfig:"RESTRICT_TO_WORKSPACE" default:"true" desc:"confine every path tools use to the workspace"`
	LogLevel           string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	MaxBodyBytes       int64         `envconfig:"MAX_BODY_BYTES" default:"10485760" desc:"largest request body accepted (413 above it)"`
	CallTimeout        time.Duration `envconfig:"CALL_TIMEOUT" default:"2m" desc:"deadline of a tool call, for tools without their own"`
	MaxConcurrentCalls int           `envconfig:"MAX_CONCURRENT_CALLS" default:"64" desc:"tool calls running at once, counted once their body has arrived; more get 503"`
	BodyTimeout        time.Duration `envconfig:"BODY_TIMEOUT" default:"30s" desc:"how long a call's request body may take to arrive (408 after it)"`
	StreamWriteTimeout time.Duration `envconfig:"STREAM_WRITE_TIMEOUT" default:"30s" desc:"a client that takes no event or result for this long is dropped and its call canceled"`
	ShutdownTimeout    time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"10s" desc:"how long shutdown waits for canceled calls to report"`
	CORSOrigins        List          `envconfig:"CORS_ORIGINS" desc:"comma-separated origins browsers may call the API from (https://chat.example.com, or * for any), e.g. for Open WebUI's direct tool servers; preflight requests need no key, every other request still does. Empty: no CORS"`

	// Tool switches: names of tools or of toolsets (files, shell, web,
	// memory, agents, channels); the service checks them against its tools.
	ToolsEnabled  List `envconfig:"TOOLS_ENABLED" desc:"comma-separated tools or toolsets (files, shell, web, memory, agents, channels) to offer, the rest off; empty: all. A tool whose dependency is missing stays off either way"`
	ToolsDisabled List `envconfig:"TOOLS_DISABLED" desc:"comma-separated tools or toolsets to leave out, even if TOOLS_ENABLED names them; an unknown name stops start-up"`
	// ToolsFile names the operator's own tools (command and http runners).
	ToolsFile string `envconfig:"TOOLS_FILE" desc:"YAML or JSON file of your own tools (command tools run in exec's sandbox, http tools POST to a URL) and of MCP servers whose tools are mounted (mcpServers, as MCP clients write it); see docs/custom-tools.md. A mistake in it stops start-up, SIGHUP reloads it. Empty: none"`

	// Audit
	AuditEnabled        bool `envconfig:"AUDIT_ENABLED" default:"true" desc:"write one JSON file per call under DATA_DIR/audit_logs/"`
	AuditRetentionDays  int  `envconfig:"AUDIT_RETENTION_DAYS" default:"30" desc:"delete audit day folders older than this (0 keeps all)"`
	AuditMaxResultChars int  `envconfig:"AUDIT_MAX_RESULT_CHARS" default:"2000" desc:"results are cut to this many characters in the audit log"`
	AuditRequired       bool `envconfig:"AUDIT_REQUIRED" default:"true" desc:"refuse a call whose start the audit log cannot record (disk full, read-only) and report a call whose final record it cannot write as an audit_failed error carrying the result; false runs and answers them anyway and only logs the fault"`

	// Filesystem tools
	ReadMaxChars   int `envconfig:"READ_MAX_CHARS" default:"50000" desc:"read_file output cap per call, in characters"`
	ListMaxEntries int `envconfig:"LIST_MAX_ENTRIES" default:"500" desc:"list_dir entries shown per call"`

	// file_search
	SearchWorkers int           `envconfig:"SEARCH_WORKERS" default:"0" desc:"folders file_search reads at once; 0 means one per CPU"`
	SearchTimeout time.Duration `envconfig:"SEARCH_TIMEOUT" default:"30s" desc:"file_search stops after this long and reports what it found so far, marked partial"`

	// memory and skills
	MemoryEnabled  bool `envconfig:"MEMORY_ENABLED" default:"true" desc:"offer the memory tool (workspace/memory/MEMORY.md, one entry per line YYYY-MM-DD|source|content)"`
	SkillsDisabled List `envconfig:"SKILLS_DISABLED" desc:"comma-separated skill names (folders under workspace/skills/) that read_file refuses to load and GET /skills reports as disabled"`

	// Network guard and web_fetch
	NetAllowCIDRs      List          `envconfig:"NET_ALLOW_CIDRS" desc:"comma-separated CIDRs (or single IPs) outbound tools may reach although private, loopback or otherwise non-public, e.g. 10.20.0.0/16"`
	NetAllowHosts      List          `envconfig:"NET_ALLOW_HOSTS" desc:"comma-separated host names outbound tools may reach whatever they resolve to (except cloud metadata): wiki.corp or *.corp.example"`
	FetchMaxBytes      int64         `envconfig:"FETCH_MAX_BYTES" default:"10485760" desc:"web_fetch reads at most this many bytes of a response body (decompressed); the rest is cut and the result says so"`
	FetchTimeout       time.Duration `envconfig:"FETCH_TIMEOUT" default:"30s" desc:"web_fetch time limit per page, redirects and body included"`
	FetchMaxRedirects  int           `envconfig:"FETCH_MAX_REDIRECTS" default:"5" desc:"redirects web_fetch follows per page; every hop is checked by the network guard"`
	FetchMaxConcurrent int           `envconfig:"FETCH_MAX_CONCURRENT" default:"4" desc:"pages one web_fetch batch fetches at once"`
	FetchMaxURLs       int           `envconfig:"FETCH_MAX_URLS" default:"10" desc:"most URLs in one web_fetch batch"`

	// screenshot
	ChromePath         string        `envconfig:"CHROME_PATH" desc:"Chromium or Chrome binary for screenshot type=web; empty: the first of chromium, chromium-browser, google-chrome... on PATH"`
	ScreenshotMaxPages int           `envconfig:"SCREENSHOT_MAX_PAGES" default:"4" desc:"screenshot: browser pages open at once; more web captures wait within their timeout, then get a busy result"`
	ScreenshotTimeout  time.Duration `envconfig:"SCREENSHOT_TIMEOUT" default:"60s" desc:"screenshot: the longest a web capture may take; the call's timeout argument (default 30s) is capped to it"`

	// exec
	ExecTimeout       time.Duration `envconfig:"EXEC_TIMEOUT" default:"30s" desc:"exec: how long a command may run when the call gives no timeout"`
	ExecMaxTimeout    time.Duration `envconfig:"EXEC_MAX_TIMEOUT" default:"10m" desc:"exec: the largest timeout a call may ask for"`
	ExecMaxConcurrent int           `envconfig:"EXEC_MAX_CONCURRENT" default:"4" desc:"exec: commands running at once; more wait within their timeout, then get a busy result"`
	ExecMaxOutput     int           `envconfig:"EXEC_MAX_OUTPUT" default:"10000" desc:"exec: characters of output in a result; more is cut in the middle with a note"`
	ExecEnvAllow      List          `envconfig:"EXEC_ENV_ALLOW" desc:"exec: extra environment variables passed to commands (NAME or PREFIX_*), besides PATH, LANG, LC_*, TZ and TERM; TOOLSVC_* never pass"`
	ExecDenyPatterns  Patterns      `envconfig:"EXEC_DENY_PATTERNS" desc:"exec: extra regular expressions refusing commands, added to the built-in denylist (one per line, or comma-separated)"`
	ExecAllowPatterns Patterns      `envconfig:"EXEC_ALLOW_PATTERNS" desc:"exec: when set, every command in a script must match one of these regular expressions (the denylist still applies)"`
	ExecSandbox       string        `envconfig:"EXEC_SANDBOX" default:"auto" desc:"exec: auto, landlock, bwrap or none; auto picks the strongest available and logs it, and leaves exec out when none works; an unavailable explicit mode stops start-up"`
	ExecNetwork       bool          `envconfig:"EXEC_NETWORK" default:"false" desc:"exec: let commands use the network; off is enforced in every mode (network namespace or seccomp); web_fetch is the guarded way out"`
	ExecPrivatePaths  List          `envconfig:"EXEC_PRIVATE_PATHS" desc:"exec: comma-separated folders or files commands must not see, besides DATA_DIR (always private)"`
	ExecMaxProcs      int           `envconfig:"EXEC_MAX_PROCS" default:"256" desc:"exec: processes and threads one command and everything it starts may have at once (control group, else RLIMIT_NPROC); 0: no limit"`
	ExecMaxMemory     Bytes         `envconfig:"EXEC_MAX_MEMORY" default:"2GiB" desc:"exec: memory one command and everything it starts may use (control group, else RLIMIT_DATA per process), e.g. 512MiB or 4GiB; 0: no limit"`
	ExecUser          string        `envconfig:"EXEC_USER" desc:"exec: when the service runs as root, run commands as this user (name or uid[:gid]); it needs write access to the workspace"`
	ExecHome          string        `envconfig:"EXEC_HOME" desc:"exec: a HOME kept between calls for dotfiles and caches; toolsvc creates it (mode 0700) and refuses to start if it already exists as a symbolic link, with another owner or writable by group or others; empty: each call gets a fresh HOME in its private temporary folder, deleted after the call, so nothing one command plants there runs in the next"`

	// Sub-agents (spawn, workflow_run, send_message): offered only when
	// LLM_BASE_URL and LLM_MODEL are set.
	LLMBaseURL          string        `envconfig:"LLM_BASE_URL" desc:"OpenAI-compatible API the sub-agents' model is reached at, e.g. http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1; with LLM_MODEL it turns on the spawn and workflow_run tools and /agents"`
	LLMAPIKey           Secret        `envconfig:"LLM_API_KEY" desc:"bearer key of the model API (optional for local servers); never logged, audited or passed to commands"`
	LLMModel            string        `envconfig:"LLM_MODEL" desc:"model name sent to the model API, e.g. qwen2.5:7b or gpt-4o-mini"`
	LLMTimeout          time.Duration `envconfig:"LLM_TIMEOUT" default:"2m" desc:"deadline of one request to the model API; 429 and 5xx replies are retried a few times within the sub-agent's own deadline"`
	AgentMaxTurns       int           `envconfig:"AGENT_MAX_TURNS" default:"25" desc:"sub-agents: model replies one task may take before it is stopped and reported as over its turn limit"`
	AgentTimeout        time.Duration `envconfig:"AGENT_TIMEOUT" default:"10m" desc:"sub-agents: the longest one task may run, model and tool calls included"`
	AgentMaxConcurrent  int           `envconfig:"AGENT_MAX_CONCURRENT" default:"2" desc:"sub-agents running at once; spawn beyond it returns a busy result, workflow_run's agents wait for a free one; also the send_message replies prepared at once"`
	XiaozhiConversation bool          `envconfig:"XIAOZHI_CONVERSATION" default:"false" desc:"voice-device (Xiaozhi) conversation mode: offer send_message, which passes the user's words to an agent with the service's tools and returns its reply (at most 120s), keeping each X-Session-ID's recent history in DATA_DIR/conversations; needs LLM_BASE_URL and LLM_MODEL"`

	// Chat channels (send_media): offered when at least one is configured.
	// Each account variable holds one value (the account "default") or
	// name=value pairs separated by commas, one per account.
	FeishuAppID          Accounts       `envconfig:"FEISHU_APP_ID" desc:"send_media to Feishu/Lark: the app's App ID (cli_...), or name=id,... for several apps"`
	FeishuAppSecret      SecretAccounts `envconfig:"FEISHU_APP_SECRET" desc:"Feishu: the App Secret of each app in FEISHU_APP_ID"`
	FeishuBaseURL        Accounts       `envconfig:"FEISHU_BASE_URL" default:"https://open.feishu.cn" desc:"Feishu: Open Platform URL; https://open.larksuite.com for Lark (name=url for one app)"`
	QQAppID              Accounts       `envconfig:"QQ_APP_ID" desc:"send_media to QQ: the official bot's AppID, or name=id,..."`
	QQAppSecret          SecretAccounts `envconfig:"QQ_APP_SECRET" desc:"QQ: the AppSecret (clientSecret) of each bot in QQ_APP_ID"`
	QQBaseURL            string         `envconfig:"QQ_BASE_URL" default:"https://api.sgroup.qq.com" desc:"QQ: bot API URL (https://sandbox.api.sgroup.qq.com for the sandbox)"`
	QQTokenURL           string         `envconfig:"QQ_TOKEN_URL" default:"https://bots.qq.com/app/getAppAccessToken" desc:"QQ: access token endpoint"`
	DingTalkClientID     Accounts       `envconfig:"DINGTALK_CLIENT_ID" desc:"send_media to DingTalk: the internal app's Client ID (AppKey), or name=id,..."`
	DingTalkClientSecret SecretAccounts `envconfig:"DINGTALK_CLIENT_SECRET" desc:"DingTalk: the Client Secret (AppSecret) of each app in DINGTALK_CLIENT_ID"`
	DingTalkRobotCode    Accounts       `envconfig:"DINGTALK_ROBOT_CODE" desc:"DingTalk: the robot code when it differs from the Client ID (name=code for one app)"`
	DingTalkAPIURL       string         `envconfig:"DINGTALK_API_URL" default:"https://api.dingtalk.com" desc:"DingTalk: API URL (tokens and robot messages)"`
	DingTalkOAPIURL      string         `envconfig:"DINGTALK_OAPI_URL" default:"https://oapi.dingtalk.com" desc:"DingTalk: old API URL (media upload)"`
	WeComCorpID          Accounts       `envconfig:"WECOM_CORP_ID" desc:"send_media to WeCom as a self-built app: the corp ID, or name=id,..."`
	WeComAgentID         Accounts       `envconfig:"WECOM_AGENT_ID" desc:"WeCom: the app's AgentId, for each account in WECOM_CORP_ID"`
	WeComSecret          SecretAccounts `envconfig:"WECOM_SECRET" desc:"WeCom: the app's Secret, for each account in WECOM_CORP_ID"`
	WeComWebhookURL      SecretAccounts `envconfig:"WECOM_WEBHOOK_URL" desc:"send_media to WeCom group robots: https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=..., or name=url,...; secret"`
	WeComBaseURL         string         `envconfig:"WECOM_BASE_URL" default:"https://qyapi.weixin.qq.com" desc:"WeCom: API URL for apps"`
	TelegramBotToken     SecretAccounts `envconfig:"TELEGRAM_BOT_TOKEN" desc:"send_media to Telegram: the bot token from @BotFather, or name=token,..."`
	TelegramBaseURL      string         `envconfig:"TELEGRAM_BASE_URL" default:"https://api.telegram.org" desc:"Telegram: Bot API URL (or a local Bot API server)"`
	DiscordBotToken      SecretAccounts `envconfig:"DISCORD_BOT_TOKEN" desc:"send_media to Discord as a bot (chat ID: the channel ID): the bot token, or name=token,..."`
	DiscordWebhookURL    SecretAccounts `envconfig:"DISCORD_WEBHOOK_URL" desc:"send_media to Discord through channel webhooks: https://discord.com/api/webhooks/..., or name=url,...; secret"`
	DiscordBaseURL       string         `envconfig:"DISCORD_BASE_URL" default:"https://discord.com/api/v10" desc:"Discord: API URL for bots"`
	SlackBotToken        SecretAccounts `envconfig:"SLACK_BOT_TOKEN" desc:"send_media to Slack: the app's bot token (xoxb-...), or name=token,..."`
	SlackBaseURL         string         `envconfig:"SLACK_BASE_URL" default:"https://slack.com/api" desc:"Slack: Web API URL"`
	WebhookURL           SecretAccounts `envconfig:"WEBHOOK_URL" desc:"send_media to your own receiver: multipart POST of a JSON payload and the files (see README), or name=url,...; secret"`
	WebhookSecret        SecretAccounts `envconfig:"WEBHOOK_SECRET" desc:"webhook: HMAC-SHA256 key of the X-Toolsvc-Signature header, for each account in WEBHOOK_URL (optional)"`
}

// Secret is one secret value. It never prints it.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[hidden]"
}

// AgentsEnabled reports whether a model endpoint is configured, which is
// what the sub-agent tools need.
func (c Config) AgentsEnabled() bool { return c.LLMBaseURL != "" && c.LLMModel != "" }

// ChannelsEnabled reports whether any chat channel is configured, which is
// what send_media needs.
func (c Config) ChannelsEnabled() bool {
	return len(c.FeishuAppID)+len(c.QQAppID)+len(c.DingTalkClientID)+len(c.WeComCorpID)+len(c.WeComWebhookURL)+
		len(c.TelegramBotToken)+len(c.DiscordBotToken)+len(c.DiscordWebhookURL)+len(c.SlackBotToken)+len(c.WebhookURL) > 0
}

// DefaultAccount is the account of a per-account variable given one value.
const DefaultAccount = "default"

// Account is one value of a per-account variable.
type Account struct{ Name, Value string }

// Accounts is a per-account variable: one value, which is the account
// "default"'s, or name=value pairs separated by commas. A value whose part
// before "=" is no account name (a URL with a query) is taken whole.
type Accounts []Account

// accountName is what an account may be called.
var accountName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Decode implements envconfig.Decoder.
func (a *Accounts) Decode(v string) error {
	var out Accounts
	for _, f := range splitList(v, ",") {
		name, val, ok := strings.Cut(f, "=")
		if !ok || !accountName.MatchString(strings.TrimSpace(name)) {
			name, val = DefaultAccount, f
		}
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if _, dup := out.Lookup(name); dup {
			return fmt.Errorf("account %q is given twice", name)
		}
		out = append(out, Account{Name: name, Value: val})
	}
	*a = out
	return nil
}

// Lookup returns the value of account name.
func (a Accounts) Lookup(name string) (string, bool) {
	for _, x := range a {
		if x.Name == name {
			return x.Value, true
		}
	}
	return "", false
}

// Names lists the accounts.
func (a Accounts) Names() []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = x.Name
	}
	return out
}

// SecretAccounts is a per-account variable of secrets (tokens, webhook
// URLs). It never prints them; SecretValues collects them for redaction.
type SecretAccounts []Account

// Decode implements envconfig.Decoder.
func (s *SecretAccounts) Decode(v string) error {
	var a Accounts
	if err := a.Decode(v); err != nil {
		return err
	}
	*s = SecretAccounts(a)
	return nil
}

// Lookup returns the value of account name.
func (s SecretAccounts) Lookup(name string) (string, bool) { return Accounts(s).Lookup(name) }

// Names lists the accounts.
func (s SecretAccounts) Names() []string { return Accounts(s).Names() }

// String hides the values.
func (s SecretAccounts) String() string { return fmt.Sprintf("[%d hidden]", len(s)) }

// Bytes is an amount of memory: a number of bytes, or a number with KiB,
// MiB or GiB (K, M, G, KB, MB and GB mean the same).
type Bytes int64

// Decode implements envconfig.Decoder.
func (b *Bytes) Decode(v string) error {
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not an amount of memory such as 512MiB, 4GiB or 1073741824", v)
	}
	*b = Bytes(n * mult)
	return nil
}

// List is a comma-separated list of plain values.
type List []string

// Decode implements envconfig.Decoder.
func (l *List) Decode(v string) error {
	*l = splitList(v, ",")
	return nil
}

// Patterns is a list of regular expressions, one per line, or separated by
// commas when the value has no newline.
type Patterns []string

// Decode implements envconfig.Decoder; every pattern must compile.
func (p *Patterns) Decode(v string) error {
	sep := ","
	if strings.Contains(v, "\n") {
		sep = "\n"
	}
	list := splitList(v, sep)
	for _, pat := range list {
		if _, err := regexp.Compile(pat); err != nil {
			return fmt.Errorf("invalid pattern %q: %w", pat, err)
		}
	}
	*p = list
	return nil
}

func splitList(v, sep string) []string {
	var out []string
	for _, f := range strings.Split(v, sep) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Load reads the configuration from the environment and validates it. An
// error names the variable at fault; a TOOLSVC_* variable that is no
// setting (a typo) stops it too, with the nearest name.
func Load() (Config, error) {
	if err := CheckNames(os.Environ()); err != nil {
		return Config{}, err
	}
	return LoadFrom(os.LookupEnv)
}

// CheckFolders refuses a data folder inside the workspace, a workspace
// inside the data folder, and the two being one folder, after resolving
// symbolic links (of the parts that exist so far). Tools work in the
// workspace, so they could otherwise read or rewrite the audit log, or the
// service's own files could land among the model's.
func (c Config) CheckFolders() error {
	ws, err := resolvePath(c.Workspace)
	if err != nil {
		return fmt.Errorf("%s_WORKSPACE: %w", Prefix, err)
	}
	data, err := resolvePath(c.DataDir)
	if err != nil {
		return fmt.Errorf("%s_DATA_DIR: %w", Prefix, err)
	}
	var how string
	switch {
	case ws == data:
		how = "is the workspace"
	case pathx.Contains(ws, data):
		how = "is inside the workspace"
	case pathx.Contains(data, ws):
		how = "contains the workspace"
	default:
		return nil
	}
	return fmt.Errorf("%s_DATA_DIR: %s (%s) %s (%s): tools could read and change the audit log. Next: choose a data folder outside the workspace, e.g. a sibling folder", Prefix, c.DataDir, data, how, ws)
}

// resolvePath makes p absolute and resolves the symbolic links in the
// longest part of it that exists; the missing rest is appended as is.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		resolved, err := filepath.EvalSymlinks(abs)
		if err == nil {
			return filepath.Join(resolved, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return filepath.Join(abs, rest), nil
		}
		rest = filepath.Join(filepath.Base(abs), rest)
		abs = parent
	}
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s_%s: %s", Prefix, name, fmt.Sprintf(format, args...)))
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		bad("ADDR", "%q is not host:port (%v)", c.Addr, err)
	} else if !isLoopback(host) && !c.KeysConfigured() && !c.AllowInsecure {
		bad("ADDR", "%q is not a loopback address and TOOLSVC_API_KEYS is empty: anyone who can reach it could run commands. Set TOOLSVC_API_KEYS, or TOOLSVC_ALLOW_INSECURE=true if something else guards the port", c.Addr)
	}
	c.validateKeys(bad)
	if c.Workspace == "" {
		bad("WORKSPACE", "must not be empty")
	}
	if c.DataDir == "" {
		bad("DATA_DIR", "must not be empty")
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		bad("LOG_LEVEL", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"MAX_BODY_BYTES", c.MaxBodyBytes},
		{"CALL_TIMEOUT", int64(c.CallTimeout)},
		{"MAX_CONCURRENT_CALLS", int64(c.MaxConcurrentCalls)},
		{"SHUTDOWN_TIMEOUT", int64(c.ShutdownTimeout)},
		{"BODY_TIMEOUT", int64(c.BodyTimeout)},
		{"STREAM_WRITE_TIMEOUT", int64(c.StreamWriteTimeout)},
		{"AUDIT_MAX_RESULT_CHARS", int64(c.AuditMaxResultChars)},
		{"READ_MAX_CHARS", int64(c.ReadMaxChars)},
		{"LIST_MAX_ENTRIES", int64(c.ListMaxEntries)},
		{"SEARCH_TIMEOUT", int64(c.SearchTimeout)},
		{"FETCH_MAX_BYTES", c.FetchMaxBytes},
		{"FETCH_TIMEOUT", int64(c.FetchTimeout)},
		{"FETCH_MAX_CONCURRENT", int64(c.FetchMaxConcurrent)},
		{"FETCH_MAX_URLS", int64(c.FetchMaxURLs)},
		{"EXEC_MAX_CONCURRENT", int64(c.ExecMaxConcurrent)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad(p.name, "must be greater than zero")
		}
	}
	if c.MinFreeBytes < 0 {
		bad("MIN_FREE_BYTES", "must be zero (no check) or more")
	}
	if c.AuditRetentionDays < 0 {
		bad("AUDIT_RETENTION_DAYS", "must be zero (keep all) or more")
	}
	for _, o := range c.CORSOrigins {
		if !validOrigin(o) {
			bad("CORS_ORIGINS", "%q is not an origin such as https://chat.example.com or http://localhost:3000, nor *", o)
		}
	}
	// file_search
	if c.SearchWorkers < 0 || c.SearchWorkers > 256 {
		bad("SEARCH_WORKERS", "must be between 0 (one per CPU) and 256")
	}
	// Network guard and web_fetch
	for _, v := range c.NetAllowCIDRs {
		if !validCIDR(v) {
			bad("NET_ALLOW_CIDRS", "%q is not a CIDR such as 10.20.0.0/16 or fd00::/8, nor a single IP address", v)
		}
	}
	if c.FetchMaxRedirects < 0 || c.FetchMaxRedirects > 20 {
		bad("FETCH_MAX_REDIRECTS", "must be between 0 and 20")
	}
	// screenshot
	if c.ScreenshotMaxPages < 1 || c.ScreenshotMaxPages > 32 {
		bad("SCREENSHOT_MAX_PAGES", "must be between 1 and 32")
	}
	if c.ScreenshotTimeout < time.Second {
		bad("SCREENSHOT_TIMEOUT", "must be at least 1s")
	}
	// exec
	if c.ExecTimeout < time.Second {
		bad("EXEC_TIMEOUT", "must be at least 1s")
	}
	if c.ExecMaxTimeout < c.ExecTimeout {
		bad("EXEC_MAX_TIMEOUT", "must be at least TOOLSVC_EXEC_TIMEOUT (%s)", c.ExecTimeout)
	}
	if c.ExecMaxOutput < 100 {
		bad("EXEC_MAX_OUTPUT", "must be at least 100 characters")
	}
	for _, n := range c.ExecEnvAllow {
		if strings.HasPrefix(strings.ToUpper(n), Prefix+"_") || strings.ContainsAny(n, "= ") {
			bad("EXEC_ENV_ALLOW", "%q cannot be passed to commands: TOOLSVC_* variables stay in the service, and names hold no '=' or space", n)
		}
		// "*" or "A*" would hand commands nearly the whole environment,
		// the LLM and channel keys of the service included.
		if p, wild := strings.CutSuffix(n, "*"); wild && len(p) < 3 {
			bad("EXEC_ENV_ALLOW", "%q is too broad: a pattern must name a prefix of at least 3 characters, such as MYAPP_*", n)
		}
	}
	switch c.ExecSandbox {
	case "auto", "landlock", "bwrap", "none":
	default:
		bad("EXEC_SANDBOX", "%q is not one of auto, landlock, bwrap, none", c.ExecSandbox)
	}
	for _, p := range c.ExecPrivatePaths {
		if !strings.HasPrefix(p, "/") {
			bad("EXEC_PRIVATE_PATHS", "%q must be an absolute path", p)
		}
	}
	if c.ExecMaxProcs < 0 {
		bad("EXEC_MAX_PROCS", "must be zero (no limit) or more")
	} else if c.ExecMaxProcs > 0 && c.ExecMaxProcs < 8 {
		bad("EXEC_MAX_PROCS", "must be at least 8: a shell pipeline needs several processes")
	}
	if c.ExecMaxMemory > 0 && c.ExecMaxMemory < 16<<20 {
		bad("EXEC_MAX_MEMORY", "must be at least 16MiB, or 0 for no limit")
	}
	// Sub-agents
	if c.LLMBaseURL != "" {
		// The value is not repeated: it could carry a password.
		if u, err := url.Parse(c.LLMBaseURL); err == nil && u.User != nil {
			bad("LLM_BASE_URL", "must not carry credentials; put the key in TOOLSVC_LLM_API_KEY")
		} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("LLM_BASE_URL", "is not an http(s) URL such as http://localhost:11434/v1")
		}
	}
	if (c.LLMBaseURL == "") != (c.LLMModel == "") {
		bad("LLM_MODEL", "TOOLSVC_LLM_BASE_URL and TOOLSVC_LLM_MODEL go together: set both to offer spawn, or neither")
	}
	if c.LLMTimeout < time.Second {
		bad("LLM_TIMEOUT", "must be at least 1s")
	}
	if c.AgentMaxTurns < 1 || c.AgentMaxTurns > 200 {
		bad("AGENT_MAX_TURNS", "must be between 1 and 200")
	}
	if c.AgentTimeout < time.Second {
		bad("AGENT_TIMEOUT", "must be at least 1s")
	}
	if c.AgentMaxConcurrent < 1 || c.AgentMaxConcurrent > 64 {
		bad("AGENT_MAX_CONCURRENT", "must be between 1 and 64")
	}
	c.validateChannels(bad)
	if c.XiaozhiConversation && !c.AgentsEnabled() {
		bad("XIAOZHI_CONVERSATION", "send_message needs a model: set TOOLSVC_LLM_BASE_URL and TOOLSVC_LLM_MODEL too")
	}
	return errors.Join(errs...)
}

// validateChannels checks that the per-account variables of each chat
// channel name the same accounts, and that URLs are http(s) URLs. Values
// are never repeated: they may be secrets.
func (c Config) validateChannels(bad func(name, format string, args ...any)) {
	pair := func(idName string, ids []string, secretName string, secrets []string) {
		for _, n := range ids {
			if !slices.Contains(secrets, n) {
				bad(secretName, "account %q of TOOLSVC_%s has no value here", n, idName)
			}
		}
		for _, n := range secrets {
			if !slices.Contains(ids, n) {
				bad(idName, "account %q of TOOLSVC_%s has no value here", n, secretName)
			}
		}
	}
	pair("FEISHU_APP_ID", c.FeishuAppID.Names(), "FEISHU_APP_SECRET", c.FeishuAppSecret.Names())
	pair("QQ_APP_ID", c.QQAppID.Names(), "QQ_APP_SECRET", c.QQAppSecret.Names())
	pair("DINGTALK_CLIENT_ID", c.DingTalkClientID.Names(), "DINGTALK_CLIENT_SECRET", c.DingTalkClientSecret.Names())
	pair("WECOM_CORP_ID", c.WeComCorpID.Names(), "WECOM_SECRET", c.WeComSecret.Names())
	pair("WECOM_CORP_ID", c.WeComCorpID.Names(), "WECOM_AGENT_ID", c.WeComAgentID.Names())
	for _, a := range c.WeComAgentID {
		if _, err := strconv.ParseInt(a.Value, 10, 64); err != nil {
			bad("WECOM_AGENT_ID", "account %q: the AgentId is a number, such as 1000002", a.Name)
		}
	}
	for _, a := range c.WebhookSecret {
		if _, ok := c.WebhookURL.Lookup(a.Name); !ok {
			bad("WEBHOOK_SECRET", "account %q has no TOOLSVC_WEBHOOK_URL", a.Name)
		}
	}
	for _, a := range c.DingTalkRobotCode {
		if _, ok := c.DingTalkClientID.Lookup(a.Name); !ok {
			bad("DINGTALK_ROBOT_CODE", "account %q has no TOOLSVC_DINGTALK_CLIENT_ID", a.Name)
		}
	}
	for _, a := range c.WeComWebhookURL {
		if _, ok := c.WeComCorpID.Lookup(a.Name); ok {
			bad("WECOM_WEBHOOK_URL", "account %q is also a WeCom app (TOOLSVC_WECOM_CORP_ID); give the robot another name", a.Name)
		}
	}
	for _, a := range c.DiscordWebhookURL {
		if _, ok := c.DiscordBotToken.Lookup(a.Name); ok {
			bad("DISCORD_WEBHOOK_URL", "account %q is also a Discord bot (TOOLSVC_DISCORD_BOT_TOKEN); give the webhook another name", a.Name)
		}
	}
	urls := map[string][]Account{
		"FEISHU_BASE_URL": c.FeishuBaseURL, "WECOM_WEBHOOK_URL": c.WeComWebhookURL, "DISCORD_WEBHOOK_URL": c.DiscordWebhookURL, "WEBHOOK_URL": c.WebhookURL,
		"QQ_BASE_URL": {{Value: c.QQBaseURL}}, "QQ_TOKEN_URL": {{Value: c.QQTokenURL}}, "DINGTALK_API_URL": {{Value: c.DingTalkAPIURL}},
		"DINGTALK_OAPI_URL": {{Value: c.DingTalkOAPIURL}}, "WECOM_BASE_URL": {{Value: c.WeComBaseURL}}, "TELEGRAM_BASE_URL": {{Value: c.TelegramBaseURL}},
		"DISCORD_BASE_URL": {{Value: c.DiscordBaseURL}}, "SLACK_BASE_URL": {{Value: c.SlackBaseURL}},
	}
	for name, list := range urls {
		for _, a := range list {
			if u, err := url.Parse(a.Value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				bad(name, "is not an http(s) URL without credentials")
				break
			}
		}
	}
}

// validCIDR accepts what netguard.ParseCIDR accepts: a CIDR or one IP
// address without a zone.
func validCIDR(v string) bool {
	if strings.Contains(v, "/") {
		_, err := netip.ParsePrefix(v)
		return err == nil
	}
	ip, err := netip.ParseAddr(v)
	return err == nil && ip.Zone() == ""
}

// validOrigin accepts "*" or scheme://host[:port] with nothing after it,
// as a browser sends it in the Origin header.
func validOrigin(o string) bool {
	if o == "*" {
		return true
	}
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == ""
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SecretValues returns every secret the service holds, for redaction: the
// API keys, the values of the Config fields of type Secret or whose variable is named
// like a secret (redact.SecretVariable: *_KEY, *_TOKEN, *_SECRET,
// *_PASSWORD...), and of every TOOLSVC_* variable so named in the
// environment, including ones this struct does not know (read by other
// parts, or added later). A comma-separated value also counts piece by piece.
func (c Config) SecretValues() []string {
	return c.secretValues(os.Environ())
}

func (c Config) secretValues(environ []string) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v == "" {
			return
		}
		out = append(out, v)
		if strings.Contains(v, ",") {
			out = append(out, splitList(v, ",")...)
		}
	}
	v := reflect.ValueOf(c)
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		name := Prefix + "_" + f.Tag.Get("envconfig")
		if keys, ok := v.Field(i).Interface().(APIKeys); ok {
			for _, k := range keys {
				add(k.Key)
			}
			continue
		}
		if sa, ok := v.Field(i).Interface().(SecretAccounts); ok {
			for _, a := range sa {
				add(a.Value)
				for _, part := range urlSecrets(a.Value) {
					add(part)
				}
			}
			continue
		}
		if f.Type != reflect.TypeFor[Secret]() && !redact.SecretVariable(name) {
			continue
		}
		switch fv := v.Field(i); fv.Kind() {
		case reflect.String:
			add(fv.String())
		case reflect.Slice:
			if fv.Type().Elem().Kind() == reflect.String {
				for j := 0; j < fv.Len(); j++ {
					add(fv.Index(j).String())
				}
			}
		}
	}
	for _, kv := range environ {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, Prefix+"_") && redact.SecretVariable(k) {
			add(val)
		}
	}
	return out
}

// urlSecrets returns the parts of a secret URL that are secrets by
// themselves: query values (WeCom's key=) and long path segments (the token
// of a Discord or Slack webhook), so that an answer quoting only the token
// is redacted too.
func urlSecrets(v string) []string {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return nil
	}
	var out []string
	for _, vals := range u.Query() {
		for _, q := range vals {
			if len(q) >= 8 {
				out = append(out, q)
			}
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= 16 {
			out = append(out, seg)
		}
	}
	if u.User != nil {
		out = append(out, u.User.String())
	}
	return out
}

const usageFormat = `toolsvc serves CountBot's agent tools over HTTP/JSON.

Usage: toolsvc [-h] [-version]
       toolsvc health [-timeout 5s]

-h prints this text; -version prints the version. "toolsvc health" asks the
service at TOOLSVC_ADDR for GET /healthz and exits 0 when it answers ok, 1
otherwise (a container's health check).

It is configured through the environment only. A TOOLSVC_* variable that is
not listed here stops start-up, with the nearest name (TOOLSVC_TEST_* is
left to tests). The start-up log has one line per tool: tool=<name>
state=on|off reason=...

VARIABLE	DEFAULT	MEANING
{{range .}}{{usage_key .}}	{{with usage_default .}}{{.}}{{else}}-{{end}}	{{usage_description .}}
{{end}}`

// Usage writes every variable with its default and meaning.
func Usage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if err := envconfig.Usagef(Prefix, &Config{}, tw, usageFormat); err != nil {
		return err
	}
	return tw.Flush()
}
