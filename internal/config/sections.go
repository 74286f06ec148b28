package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// report records a problem with the variable name (written without the
// prefix).
type report func(name, format string, args ...any)

// Validate checks values that parse but make no sense, section by
// section, and reports every problem found, each naming its variable.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s_%s: %s", Prefix, name, fmt.Sprintf(format, args...)))
	}
	// Every section with a validate method is checked, in the order of
	// the sections, so a new section's checks cannot be left out.
	v := reflect.ValueOf(c)
	for i := 0; i < v.NumField(); i++ {
		if s, ok := v.Field(i).Interface().(interface{ validate(report) }); ok {
			s.validate(bad)
		}
	}
	return errors.Join(errs...)
}

// limit is a setting that must be greater than zero.
type limit struct {
	name string
	v    int64
}

// positive reports each limit that is zero or less.
func positive(bad report, limits ...limit) {
	for _, l := range limits {
		if l.v <= 0 {
			bad(l.name, "must be greater than zero")
		}
	}
}

// Access is where the service listens and who may call it; the HTTP
// gate takes its keys, origins and host names.
type Access struct {
	Addr            string        `env:"ADDR" brief:"host:port to listen on" default:"127.0.0.1:8080" desc:"host:port to listen on"`
	AllowInsecure   bool          `env:"ALLOW_INSECURE" default:"false" desc:"allow listening on a non-loopback address without API keys"`
	APIKeys         APIKeys       `env:"API_KEYS" brief:"bearer keys: name=key or a bare key" desc:"comma-separated bearer keys, each name=key or a bare key (named key- and 8 hex digits of its SHA-256); when set, every route but /healthz, /readyz and CORS preflight needs one (/metrics, /mcp and /openapi.json included). Sub-agent tasks belong to the key that started them (another key gets 404), send_message conversations to the key and the session. Logs and audit records name the key, never show it"`
	AdminKeys       APIKeys       `env:"ADMIN_KEYS" desc:"comma-separated bearer keys, name=key or bare, that also see, follow and cancel every key's sub-agent tasks (those started before keys were set included); they need no entry in API_KEYS"`
	CORSOrigins     List          `env:"CORS_ORIGINS" desc:"comma-separated origins browsers may call the API from (https://chat.example.com; * for any, only with TOOLSVC_API_KEYS; null, the origin of sandboxed frames and local files, only when listed), e.g. for Open WebUI's direct tool servers; preflight requests need no key, every other request still does. A browser's request from any other web page gets 403. Empty: no browser page may call the API"`
	AllowedHosts    List          `env:"ALLOWED_HOSTS" desc:"comma-separated host names (or *.example.com) the Host header may name besides localhost and loopback addresses, any port, e.g. the name a reverse proxy forwards. Requests that come in on a loopback address and name another host get 403, which keeps renamed (DNS rebinding) pages out; when set, the check applies on every address. /healthz, /readyz and the signed /media/ links of TOOLSVC_PUBLIC_URL are exempt"`
	PolicyFile      string        `env:"POLICY_FILE" desc:"YAML or JSON file of what each key (by its name in API_KEYS or ADMIN_KEYS) may do: the tools it may call and see (tools: allow/deny, names, toolsets or globs), its rate (rate: per_minute, burst), its calls at once (max_concurrent), the bounds of its sub-agents (subagents: max_running, max_turns, beside AGENT_MAX_CONCURRENT and AGENT_MAX_TURNS) and its own folder inside the workspace, which all its tools take as their root (workspace: tenants/{key}), with a default for the keys it does not list; a tool a key may not call answers as an unknown tool, a key over its rate or its calls at once gets 429. A mistake in it (an unknown key, tool or field) stops start-up, SIGHUP reloads it with the tools file. Needs API_KEYS or ADMIN_KEYS. Empty: every key calls every tool, unlimited"`
	ApproverKeys    List          `env:"APPROVER_KEYS" desc:"comma-separated names of keys (in API_KEYS) that may decide the calls the policy file's approval rules hold for a person, through GET and POST /approvals and its page; admin keys may too. A key never decides its own call unless the policy gives it self_approve: true"`
	ApprovalTTL     time.Duration `env:"APPROVAL_TTL" default:"1h" desc:"how long a held call's approval stays open: undecided by then it expires (and is recorded so); approved, the call must be sent again before then"`
	ApprovalSealKey Secret        `env:"APPROVAL_SEAL_KEY" desc:"32 bytes in base64 (openssl rand -base64 32) that seal the requestState an MCP client carries while a person decides a held call, so that any replica holding the same key can finish it and nobody can forge one; set the same value on every replica. Empty: a key made at start-up, which a restart forgets (the client is then asked again)"`
}

// KeysConfigured reports whether any key is set, so that every route but
// the health probes needs one.
func (s Access) KeysConfigured() bool { return len(s.APIKeys)+len(s.AdminKeys) > 0 }

func (s Access) validate(bad report) {
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		bad("ADDR", "%s", addrError(s.Addr))
	} else if !isLoopback(host) && !s.KeysConfigured() && !s.AllowInsecure {
		bad("ADDR", "%q is not a loopback address and TOOLSVC_API_KEYS is empty: anyone who can reach it could run commands. Set TOOLSVC_API_KEYS, or TOOLSVC_ALLOW_INSECURE=true if something else guards the port", s.Addr)
	}
	s.validateKeys(bad)
	s.validateApprovers(bad)
	if s.PolicyFile != "" && !s.KeysConfigured() {
		bad("POLICY_FILE", "a policy says what each key may do, and no key is set: set TOOLSVC_API_KEYS (or TOOLSVC_ADMIN_KEYS) too, or leave TOOLSVC_POLICY_FILE empty")
	}
	for _, o := range s.CORSOrigins {
		if !validOrigin(o) {
			bad("CORS_ORIGINS", "%q is not an origin such as https://chat.example.com or http://localhost:3000, nor * or null", o)
		}
		if o == "*" && !s.KeysConfigured() {
			bad("CORS_ORIGINS", "* lets every web page the user opens call the API, and without TOOLSVC_API_KEYS any of them could run commands on this machine. List the origins that may call it (https://chat.example.com), or set TOOLSVC_API_KEYS")
		}
	}
	for _, h := range s.AllowedHosts {
		if !validHostName(h) {
			bad("ALLOWED_HOSTS", "%q is not a host name such as toolsvc.example.com or *.example.com, nor an IP address (no scheme, no port)", h)
		}
	}
}

// Server is the service's folders, log level and shutdown.
type Server struct {
	Workspace         string        `env:"WORKSPACE" brief:"folder the tools work in" default:"./workspace" desc:"folder the tools work in; created if missing"`
	DataDir           string        `env:"DATA_DIR" brief:"the service's own folder (audit log)" default:"./data" desc:"folder for the service's own data (audit_logs/); never visible to tools; must be outside the workspace (and not contain it)"`
	RestrictWorkspace bool          `env:"RESTRICT_TO_WORKSPACE" default:"true" desc:"confine every path tools use to the workspace"`
	MinFreeBytes      int64         `env:"MIN_FREE_BYTES" default:"67108864" desc:"free space the workspace's and the data folder's file systems need for /readyz to report ready (0: no check)"`
	LogLevel          string        `env:"LOG_LEVEL" brief:"debug, info, warn or error" default:"info" desc:"debug, info, warn or error"`
	LogFlushInterval  time.Duration `env:"LOG_FLUSH_INTERVAL" default:"100ms" desc:"how long info lines (the access log, one per request) may wait to be written together; warnings and errors are written at once, after the lines before them, and shutdown writes what waits (0: every line at once; at most 10s)"`
	ShutdownTimeout   time.Duration `env:"SHUTDOWN_TIMEOUT" default:"10s" desc:"how long shutdown waits for canceled calls to report"`
}

func (s Server) validate(bad report) {
	if s.Workspace == "" {
		bad("WORKSPACE", "must not be empty")
	}
	if s.DataDir == "" {
		bad("DATA_DIR", "must not be empty")
	}
	if _, err := zerolog.ParseLevel(s.LogLevel); err != nil || s.LogLevel == "" {
		bad("LOG_LEVEL", "%q is not one of debug, info, warn, error", s.LogLevel)
	}
	positive(bad, limit{"SHUTDOWN_TIMEOUT", int64(s.ShutdownTimeout)})
	if s.LogFlushInterval < 0 || s.LogFlushInterval > 10*time.Second {
		bad("LOG_FLUSH_INTERVAL", "must be from 0 (every line at once) to 10s")
	}
	if s.MinFreeBytes < 0 {
		bad("MIN_FREE_BYTES", "must be zero (no check) or more")
	}
}

// Calls are the limits of every call, whichever door it comes through.
type Calls struct {
	MaxBodyBytes       int64         `env:"MAX_BODY_BYTES" default:"10485760" desc:"largest request body accepted (413 above it)"`
	CallTimeout        time.Duration `env:"CALL_TIMEOUT" default:"2m" desc:"deadline of a tool call, for tools without their own"`
	MaxConcurrentCalls int           `env:"MAX_CONCURRENT_CALLS" default:"64" desc:"tool calls running at once, counted once their body has arrived; more get 503"`
	BodyTimeout        time.Duration `env:"BODY_TIMEOUT" default:"30s" desc:"how long a call's request body may take to arrive (408 after it)"`
	StreamWriteTimeout time.Duration `env:"STREAM_WRITE_TIMEOUT" default:"30s" desc:"a client that takes no event or result for this long is dropped and its call canceled"`
}

func (s Calls) validate(bad report) {
	positive(bad,
		limit{"MAX_BODY_BYTES", s.MaxBodyBytes},
		limit{"CALL_TIMEOUT", int64(s.CallTimeout)},
		limit{"MAX_CONCURRENT_CALLS", int64(s.MaxConcurrentCalls)},
		limit{"BODY_TIMEOUT", int64(s.BodyTimeout)},
		limit{"STREAM_WRITE_TIMEOUT", int64(s.StreamWriteTimeout)},
	)
}

// Switches say which tools are offered, the tools file's included.
type Switches struct {
	ToolsEnabled  List   `env:"TOOLS_ENABLED" desc:"comma-separated tools or toolsets (files, shell, web, memory, agents, channels) to offer, the rest off; empty: all. A tool whose dependency is missing stays off either way"`
	ToolsDisabled List   `env:"TOOLS_DISABLED" brief:"tools or toolsets to leave out" desc:"comma-separated tools or toolsets to leave out, even if TOOLS_ENABLED names them; an unknown name stops start-up"`
	ToolsFile     string `env:"TOOLS_FILE" brief:"your own tools and MCP servers" desc:"YAML or JSON file of your own tools (command tools run in exec's sandbox, http tools POST to a URL) and of MCP servers whose tools are mounted (mcpServers, as MCP clients write it); see docs/custom-tools.md. A mistake in it stops start-up, SIGHUP reloads it. Refused when it lies in the workspace, when someone but its owner (the service's user or root) can write it or a folder above it, or when it reads a TOOLSVC_ variable. Empty: none"`
}

// Audit is the audit log's settings.
type Audit struct {
	AuditEnabled        bool   `env:"AUDIT_ENABLED" default:"true" desc:"write one JSON file per call under DATA_DIR/audit_logs/"`
	AuditRetentionDays  int    `env:"AUDIT_RETENTION_DAYS" default:"30" desc:"delete audit day folders older than this (0 keeps all)"`
	AuditMaxResultChars int    `env:"AUDIT_MAX_RESULT_CHARS" default:"2000" desc:"results are cut to this many characters in the audit log"`
	AuditStdout         bool   `env:"AUDIT_STDOUT" default:"false" desc:"also write each final audit record as one JSON line to standard output beside the service's own log lines (an audit line has seq, prev, call_id and tool_name, a log line level and message; seq and prev let a log store check the chain as toolsvc audit verify does), for log shippers that collect a container's output"`
	AuditRequired       bool   `env:"AUDIT_REQUIRED" default:"true" desc:"refuse a call whose start the audit log cannot record (disk full, read-only) and report a call whose final record it cannot write as an audit_failed error carrying the result; false runs and answers them anyway and only logs the fault"`
	AuditSigningKeyFile string `env:"AUDIT_SIGNING_KEY_FILE" desc:"an Ed25519 private key, PKCS#8 PEM as openssl genpkey -algorithm ed25519 -out FILE writes it, that signs the audit chain's digests (written every minute and at shutdown; toolsvc audit verify -pubkey checks them); start-up fails when it cannot be read. Empty: the digests are written unsigned, which shows records edited or deleted by someone who does not also rewrite the digests. The key is never logged; keep the file out of DATA_DIR and readable by the service alone"`
}

func (s Audit) validate(bad report) {
	positive(bad, limit{"AUDIT_MAX_RESULT_CHARS", int64(s.AuditMaxResultChars)})
	if s.AuditRetentionDays < 0 {
		bad("AUDIT_RETENTION_DAYS", "must be zero (keep all) or more")
	}
}

// Files are the limits of read_file, list_dir and file_search.
type Files struct {
	ReadMaxChars   int           `env:"READ_MAX_CHARS" default:"50000" desc:"read_file output cap per call, in characters"`
	ListMaxEntries int           `env:"LIST_MAX_ENTRIES" default:"500" desc:"list_dir entries shown per call"`
	SearchWorkers  int           `env:"SEARCH_WORKERS" default:"0" desc:"folders file_search reads at once; 0 means one per CPU"`
	SearchTimeout  time.Duration `env:"SEARCH_TIMEOUT" default:"30s" desc:"file_search stops after this long and reports what it found so far, marked partial"`
}

func (s Files) validate(bad report) {
	positive(bad,
		limit{"READ_MAX_CHARS", int64(s.ReadMaxChars)},
		limit{"LIST_MAX_ENTRIES", int64(s.ListMaxEntries)},
		limit{"SEARCH_TIMEOUT", int64(s.SearchTimeout)},
	)
	if s.SearchWorkers < 0 || s.SearchWorkers > 256 {
		bad("SEARCH_WORKERS", "must be between 0 (one per CPU) and 256")
	}
}

// Memory switches the memory tool and disables skills.
type Memory struct {
	MemoryEnabled  bool `env:"MEMORY_ENABLED" default:"true" desc:"offer the memory tool (workspace/memory/MEMORY.md, one entry per line YYYY-MM-DD|source|content)"`
	SkillsDisabled List `env:"SKILLS_DISABLED" desc:"comma-separated skill names (folders under workspace/skills/) that read_file refuses to load and GET /skills reports as disabled"`
}

// Web is the network guard's exceptions and web_fetch's limits.
type Web struct {
	NetAllowCIDRs      List          `env:"NET_ALLOW_CIDRS" desc:"comma-separated CIDRs (or single IPs) outbound tools may reach although private, loopback or otherwise non-public, e.g. 10.20.0.0/16"`
	NetAllowHosts      List          `env:"NET_ALLOW_HOSTS" desc:"comma-separated host names outbound tools may reach whatever they resolve to (except cloud metadata): wiki.corp or *.corp.example"`
	FetchMaxBytes      int64         `env:"FETCH_MAX_BYTES" default:"10485760" desc:"web_fetch reads at most this many bytes of a response body (decompressed); the rest is cut and the result says so"`
	FetchTimeout       time.Duration `env:"FETCH_TIMEOUT" default:"30s" desc:"web_fetch time limit per page, redirects and body included"`
	FetchMaxRedirects  int           `env:"FETCH_MAX_REDIRECTS" default:"5" desc:"redirects web_fetch follows per page; every hop is checked by the network guard"`
	FetchMaxConcurrent int           `env:"FETCH_MAX_CONCURRENT" default:"4" desc:"pages one web_fetch batch fetches at once"`
	FetchMaxURLs       int           `env:"FETCH_MAX_URLS" default:"10" desc:"most URLs in one web_fetch batch"`
}

func (s Web) validate(bad report) {
	for _, v := range s.NetAllowCIDRs {
		if !validCIDR(v) {
			bad("NET_ALLOW_CIDRS", "%q is not a CIDR such as 10.20.0.0/16 or fd00::/8, nor a single IP address", v)
		}
	}
	positive(bad,
		limit{"FETCH_MAX_BYTES", s.FetchMaxBytes},
		limit{"FETCH_TIMEOUT", int64(s.FetchTimeout)},
		limit{"FETCH_MAX_CONCURRENT", int64(s.FetchMaxConcurrent)},
		limit{"FETCH_MAX_URLS", int64(s.FetchMaxURLs)},
	)
	if s.FetchMaxRedirects < 0 || s.FetchMaxRedirects > 20 {
		bad("FETCH_MAX_REDIRECTS", "must be between 0 and 20")
	}
}

// Screenshot is the browser behind screenshot type=web.
type Screenshot struct {
	ChromePath         string        `env:"CHROME_PATH" desc:"Chromium or Chrome binary for screenshot type=web; empty: the first of chromium, chromium-browser, google-chrome... on PATH"`
	ScreenshotMaxPages int           `env:"SCREENSHOT_MAX_PAGES" default:"4" desc:"screenshot: browser pages open at once; more web captures wait within their timeout, then get a busy result"`
	ScreenshotTimeout  time.Duration `env:"SCREENSHOT_TIMEOUT" default:"60s" desc:"screenshot: the longest a web capture may take; the call's timeout argument (default 30s) is capped to it"`
}

func (s Screenshot) validate(bad report) {
	if s.ScreenshotMaxPages < 1 || s.ScreenshotMaxPages > 32 {
		bad("SCREENSHOT_MAX_PAGES", "must be between 1 and 32")
	}
	if s.ScreenshotTimeout < time.Second {
		bad("SCREENSHOT_TIMEOUT", "must be at least 1s")
	}
}

// Exec is exec's command guard, sandbox and limits.
type Exec struct {
	ExecTimeout       time.Duration `env:"EXEC_TIMEOUT" default:"30s" desc:"exec: how long a command may run when the call gives no timeout"`
	ExecMaxTimeout    time.Duration `env:"EXEC_MAX_TIMEOUT" default:"10m" desc:"exec: the largest timeout a call may ask for"`
	ExecMaxConcurrent int           `env:"EXEC_MAX_CONCURRENT" default:"4" desc:"exec: commands running at once; more wait within their timeout, then get a busy result"`
	ExecMaxOutput     int           `env:"EXEC_MAX_OUTPUT" default:"10000" desc:"exec: characters of output in a result; more is cut in the middle with a note"`
	ExecEnvAllow      List          `env:"EXEC_ENV_ALLOW" desc:"exec: extra environment variables passed to commands (NAME or PREFIX_*), besides PATH, LANG, LC_*, TZ and TERM; TOOLSVC_* never pass"`
	ExecDenyPatterns  Patterns      `env:"EXEC_DENY_PATTERNS" desc:"exec: extra regular expressions refusing commands, added to the built-in denylist (one per line, or comma-separated)"`
	ExecAllowPatterns Patterns      `env:"EXEC_ALLOW_PATTERNS" desc:"exec: when set, every command in a script must match one of these regular expressions (the denylist still applies)"`
	ExecSandbox       string        `env:"EXEC_SANDBOX" brief:"auto, landlock, bwrap or none" default:"auto" desc:"exec: auto, landlock, bwrap or none; auto picks the strongest available and logs it, and leaves exec out when none works or nothing keeps a command's signals in its call; an unavailable explicit mode stops start-up"`
	ExecNetwork       bool          `env:"EXEC_NETWORK" brief:"let commands use the network" default:"false" desc:"exec: let commands use the network; off is enforced in every mode (network namespace or seccomp); web_fetch is the guarded way out"`
	ExecNetAllow      List          `env:"EXEC_NET_ALLOW" desc:"exec: a network allowlist instead of all or nothing: comma-separated host names (registry.npmjs.org), wildcards (*.pythonhosted.org: the names below, not the name itself), CIDRs (10.1.2.0/24), each with an optional :port or :* (without one: ports 80 and 443). Each command then gets a network namespace of its own whose only way out is a proxy in the service (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, npm's and pip's variables point to it); every connection is judged by these lists, then by the network guard (a listed name that resolves to a loopback, private or metadata address is refused unless NET_ALLOW_HOSTS or NET_ALLOW_CIDRS opens it), and each refusal is named in the result. No resolver inside: programs that ignore the proxy variables get no network. Needs a network namespace per command (root, or user namespaces); not with EXEC_NETWORK=true"`
	ExecNetDeny       List          `env:"EXEC_NET_DENY" desc:"exec: entries as in EXEC_NET_ALLOW that are refused even when the allowlist matches (deny wins); without a port, every port"`
	ExecPrivatePaths  List          `env:"EXEC_PRIVATE_PATHS" desc:"exec: comma-separated folders or files commands must not see, besides DATA_DIR (always private)"`
	ExecMaxProcs      int           `env:"EXEC_MAX_PROCS" default:"256" desc:"exec: processes and threads one command and everything it starts may have at once (control group, else RLIMIT_NPROC); 0: no limit"`
	ExecMaxMemory     Bytes         `env:"EXEC_MAX_MEMORY" default:"2GiB" desc:"exec: memory one command and everything it starts may use (control group, else RLIMIT_DATA per process), e.g. 512MiB or 4GiB; 0: no limit. Also the size of the tmpfs a command gets as its TMPDIR where it has mounts of its own (root, bubblewrap)"`
	ExecUser          string        `env:"EXEC_USER" desc:"exec: when the service runs as root, run commands as this user (name or uid[:gid]); it needs write access to the workspace"`
	ExecHome          string        `env:"EXEC_HOME" desc:"exec: a HOME kept between calls for dotfiles and caches; toolsvc creates it (mode 0700) and refuses to start if it already exists as a symbolic link, with another owner or writable by group or others; empty: each call gets a fresh HOME in its private temporary folder, deleted after the call, so nothing one command plants there runs in the next"`
}

func (s Exec) validate(bad report) {
	if s.ExecTimeout < time.Second {
		bad("EXEC_TIMEOUT", "must be at least 1s")
	}
	if s.ExecMaxTimeout < s.ExecTimeout {
		bad("EXEC_MAX_TIMEOUT", "must be at least TOOLSVC_EXEC_TIMEOUT (%s)", s.ExecTimeout)
	}
	positive(bad, limit{"EXEC_MAX_CONCURRENT", int64(s.ExecMaxConcurrent)})
	if s.ExecMaxOutput < 100 {
		bad("EXEC_MAX_OUTPUT", "must be at least 100 characters")
	}
	s.validateEnvAllow(bad)
	if s.ExecNetwork && len(s.ExecNetAllow) > 0 {
		bad("EXEC_NET_ALLOW", "is an allowlist, and TOOLSVC_EXEC_NETWORK=true opens every address: set one of them (unset EXEC_NETWORK to keep the allowlist)")
	}
	if len(s.ExecNetDeny) > 0 && len(s.ExecNetAllow) == 0 {
		bad("EXEC_NET_DENY", "takes exceptions to TOOLSVC_EXEC_NET_ALLOW, which is empty: without an allowlist commands have no network, or all of it with EXEC_NETWORK=true")
	}
	switch s.ExecSandbox {
	case "auto", "landlock", "bwrap", "none":
	default:
		bad("EXEC_SANDBOX", "%q is not one of auto, landlock, bwrap, none", s.ExecSandbox)
	}
	for _, p := range s.ExecPrivatePaths {
		if !strings.HasPrefix(p, "/") {
			bad("EXEC_PRIVATE_PATHS", "%q must be an absolute path", p)
		}
	}
	if s.ExecMaxProcs < 0 {
		bad("EXEC_MAX_PROCS", "must be zero (no limit) or more")
	} else if s.ExecMaxProcs > 0 && s.ExecMaxProcs < 8 {
		bad("EXEC_MAX_PROCS", "must be at least 8: a shell pipeline needs several processes")
	}
	if s.ExecMaxMemory > 0 && s.ExecMaxMemory < 16<<20 {
		bad("EXEC_MAX_MEMORY", "must be at least 16MiB, or 0 for no limit")
	}
}

// validateEnvAllow refuses names that would hand commands the service's
// own settings, or nearly the whole environment.
func (s Exec) validateEnvAllow(bad report) {
	for _, n := range s.ExecEnvAllow {
		if strings.HasPrefix(strings.ToUpper(n), Prefix+"_") || strings.ContainsAny(n, "= ") {
			bad("EXEC_ENV_ALLOW", "%q cannot be passed to commands: TOOLSVC_* variables stay in the service, and names hold no '=' or space", n)
		}
		// "*" or "A*" would hand commands nearly the whole environment,
		// the LLM and channel keys of the service included.
		if p, wild := strings.CutSuffix(n, "*"); wild && len(p) < 3 {
			bad("EXEC_ENV_ALLOW", "%q is too broad: a pattern must name a prefix of at least 3 characters, such as MYAPP_*", n)
		}
	}
}

// Agents is the model endpoint of the sub-agents and their limits.
type Agents struct {
	LLMBaseURL          string        `env:"LLM_BASE_URL" brief:"OpenAI-compatible model API" desc:"OpenAI-compatible API the sub-agents' model is reached at, e.g. http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1; with LLM_MODEL it turns on the spawn and workflow_run tools and /agents"`
	LLMAPIKey           Secret        `env:"LLM_API_KEY" brief:"the model API's bearer key" desc:"bearer key of the model API (optional for local servers); never logged, audited or passed to commands"`
	LLMModel            string        `env:"LLM_MODEL" brief:"model name, e.g. gpt-4o-mini" desc:"model name sent to the model API, e.g. qwen2.5:7b or gpt-4o-mini"`
	LLMTimeout          time.Duration `env:"LLM_TIMEOUT" default:"2m" desc:"deadline of one request to the model API; 429 and 5xx replies are retried a few times within the sub-agent's own deadline"`
	LLMStream           bool          `env:"LLM_STREAM" default:"false" desc:"read the model's replies as server-sent chunks (stream: true), assembling tool calls from their deltas, so that GET /agents/{id}/events carries the model's text as it arrives (text events); a model that answers that it only supports stream mode (DashScope's QwQ, thinking Qwen3) is streamed anyway"`
	LLMEchoFields       List          `env:"LLM_ECHO_FIELDS" desc:"comma-separated fields of a model reply's message or tool calls to send back with it in later requests, besides those providers document as required (reasoning_content, reasoning_details, a tool call's extra_content); * sends back every field. Empty: only those, since strict servers (Groq) refuse an assistant message with any other"`
	AgentMaxTurns       int           `env:"AGENT_MAX_TURNS" default:"25" desc:"sub-agents: model replies one task may take before it is stopped and reported as over its turn limit"`
	AgentTimeout        time.Duration `env:"AGENT_TIMEOUT" default:"10m" desc:"sub-agents: the longest one task may run, model and tool calls included"`
	AgentMaxConcurrent  int           `env:"AGENT_MAX_CONCURRENT" default:"2" desc:"sub-agents running at once; spawn beyond it returns a busy result, workflow_run's agents wait for a free one; also the send_message replies prepared at once"`
	XiaozhiConversation bool          `env:"XIAOZHI_CONVERSATION" default:"false" desc:"voice-device (Xiaozhi) conversation mode: offer send_message, which passes the user's words to an agent with the service's tools and returns its reply (at most 120s), keeping each X-Session-ID's recent history in DATA_DIR/conversations; needs LLM_BASE_URL and LLM_MODEL"`
}

// AgentsEnabled reports whether a model endpoint is configured, which is
// what the sub-agent tools need.
func (s Agents) AgentsEnabled() bool { return s.LLMBaseURL != "" && s.LLMModel != "" }

func (s Agents) validate(bad report) {
	if s.LLMBaseURL != "" {
		// The value is not repeated: it could carry a password.
		if u, err := url.Parse(s.LLMBaseURL); err == nil && u.User != nil {
			bad("LLM_BASE_URL", "must not carry credentials; put the key in TOOLSVC_LLM_API_KEY")
		} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("LLM_BASE_URL", "is not an http(s) URL such as http://localhost:11434/v1")
		}
	}
	if (s.LLMBaseURL == "") != (s.LLMModel == "") {
		bad("LLM_MODEL", "TOOLSVC_LLM_BASE_URL and TOOLSVC_LLM_MODEL go together: set both to offer spawn, or neither")
	}
	if s.LLMTimeout < time.Second {
		bad("LLM_TIMEOUT", "must be at least 1s")
	}
	if s.AgentMaxTurns < 1 || s.AgentMaxTurns > 200 {
		bad("AGENT_MAX_TURNS", "must be between 1 and 200")
	}
	if s.AgentTimeout < time.Second {
		bad("AGENT_TIMEOUT", "must be at least 1s")
	}
	if s.AgentMaxConcurrent < 1 || s.AgentMaxConcurrent > 64 {
		bad("AGENT_MAX_CONCURRENT", "must be between 1 and 64")
	}
	if s.XiaozhiConversation && !s.AgentsEnabled() {
		bad("XIAOZHI_CONVERSATION", "send_message needs a model: set TOOLSVC_LLM_BASE_URL and TOOLSVC_LLM_MODEL too")
	}
}

// Channels are the chat accounts of send_media, one variable per part
// of an account; internal/app joins them into one account each.
type Channels struct {
	FeishuAppID          Accounts       `env:"FEISHU_APP_ID" desc:"send_media to Feishu/Lark: the app's App ID (cli_...), or name=id,... for several apps"`
	FeishuAppSecret      SecretAccounts `env:"FEISHU_APP_SECRET" desc:"Feishu: the App Secret of each app in FEISHU_APP_ID"`
	FeishuBaseURL        Accounts       `env:"FEISHU_BASE_URL" default:"https://open.feishu.cn" desc:"Feishu: Open Platform URL; https://open.larksuite.com for Lark (name=url for one app)"`
	QQAppID              Accounts       `env:"QQ_APP_ID" desc:"send_media to QQ: the official bot's AppID, or name=id,..."`
	QQAppSecret          SecretAccounts `env:"QQ_APP_SECRET" desc:"QQ: the AppSecret (clientSecret) of each bot in QQ_APP_ID"`
	QQBaseURL            string         `env:"QQ_BASE_URL" default:"https://api.sgroup.qq.com" desc:"QQ: bot API URL (https://sandbox.api.sgroup.qq.com for the sandbox)"`
	QQTokenURL           string         `env:"QQ_TOKEN_URL" default:"https://bots.qq.com/app/getAppAccessToken" desc:"QQ: access token endpoint"`
	DingTalkClientID     Accounts       `env:"DINGTALK_CLIENT_ID" desc:"send_media to DingTalk: the internal app's Client ID (AppKey), or name=id,..."`
	DingTalkClientSecret SecretAccounts `env:"DINGTALK_CLIENT_SECRET" desc:"DingTalk: the Client Secret (AppSecret) of each app in DINGTALK_CLIENT_ID"`
	DingTalkRobotCode    Accounts       `env:"DINGTALK_ROBOT_CODE" desc:"DingTalk: the robot code when it differs from the Client ID (name=code for one app)"`
	DingTalkAPIURL       string         `env:"DINGTALK_API_URL" default:"https://api.dingtalk.com" desc:"DingTalk: API URL (tokens and robot messages)"`
	DingTalkOAPIURL      string         `env:"DINGTALK_OAPI_URL" default:"https://oapi.dingtalk.com" desc:"DingTalk: old API URL (media upload)"`
	WeComCorpID          Accounts       `env:"WECOM_CORP_ID" desc:"send_media to WeCom as a self-built app: the corp ID, or name=id,..."`
	WeComAgentID         Accounts       `env:"WECOM_AGENT_ID" desc:"WeCom: the app's AgentId, for each account in WECOM_CORP_ID"`
	WeComSecret          SecretAccounts `env:"WECOM_SECRET" desc:"WeCom: the app's Secret, for each account in WECOM_CORP_ID"`
	WeComWebhookURL      SecretAccounts `env:"WECOM_WEBHOOK_URL" desc:"send_media to WeCom group robots: https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=..., or name=url,...; secret"`
	WeComBaseURL         string         `env:"WECOM_BASE_URL" default:"https://qyapi.weixin.qq.com" desc:"WeCom: API URL for apps"`
	TelegramBotToken     SecretAccounts `env:"TELEGRAM_BOT_TOKEN" desc:"send_media to Telegram: the bot token from @BotFather, or name=token,..."`
	TelegramBaseURL      string         `env:"TELEGRAM_BASE_URL" default:"https://api.telegram.org" desc:"Telegram: Bot API URL (or a local Bot API server)"`
	DiscordBotToken      SecretAccounts `env:"DISCORD_BOT_TOKEN" desc:"send_media to Discord as a bot (chat ID: the channel ID): the bot token, or name=token,..."`
	DiscordWebhookURL    SecretAccounts `env:"DISCORD_WEBHOOK_URL" desc:"send_media to Discord through channel webhooks: https://discord.com/api/webhooks/..., or name=url,...; secret"`
	DiscordBaseURL       string         `env:"DISCORD_BASE_URL" default:"https://discord.com/api/v10" desc:"Discord: API URL for bots"`
	SlackBotToken        SecretAccounts `env:"SLACK_BOT_TOKEN" desc:"send_media to Slack: the app's bot token (xoxb-...), or name=token,..."`
	SlackBaseURL         string         `env:"SLACK_BASE_URL" default:"https://slack.com/api" desc:"Slack: Web API URL"`
	WebhookURL           SecretAccounts `env:"WEBHOOK_URL" desc:"send_media to your own receiver: multipart POST of a JSON payload and the files (see README), or name=url,...; secret"`
	WebhookSecret        SecretAccounts `env:"WEBHOOK_SECRET" desc:"webhook: HMAC-SHA256 key of the X-Toolsvc-Signature header, for each account in WEBHOOK_URL (optional)"`
	PublicURL            string         `env:"PUBLIC_URL" desc:"the service's address as chat platforms reach it from the internet (https://bot.example.com, a path prefix allowed). Set: QQ fetches each file from a signed link GET <PUBLIC_URL>/media/<token> that needs no key, serves that one workspace file read-only and expires after 10 minutes, as QQ's rich-media API documents. Empty: files go to QQ as base64 file_data, which QQ documents as not yet supported (start-up warns)"`
}

// ChannelsEnabled reports whether any chat channel is configured, which is
// what send_media needs.
func (s Channels) ChannelsEnabled() bool {
	return len(s.FeishuAppID)+len(s.QQAppID)+len(s.DingTalkClientID)+len(s.WeComCorpID)+len(s.WeComWebhookURL)+
		len(s.TelegramBotToken)+len(s.DiscordBotToken)+len(s.DiscordWebhookURL)+len(s.SlackBotToken)+len(s.WebhookURL) > 0
}

// validate checks that the per-account variables of each chat channel
// name the same accounts, and that URLs are http(s) URLs. Values are never
// repeated: they may be secrets.
func (s Channels) validate(bad report) {
	s.validateAccounts(bad)
	urls := map[string][]Account{
		"FEISHU_BASE_URL": s.FeishuBaseURL, "WECOM_WEBHOOK_URL": s.WeComWebhookURL, "DISCORD_WEBHOOK_URL": s.DiscordWebhookURL, "WEBHOOK_URL": s.WebhookURL,
		"QQ_BASE_URL": {{Value: s.QQBaseURL}}, "QQ_TOKEN_URL": {{Value: s.QQTokenURL}}, "DINGTALK_API_URL": {{Value: s.DingTalkAPIURL}},
		"DINGTALK_OAPI_URL": {{Value: s.DingTalkOAPIURL}}, "WECOM_BASE_URL": {{Value: s.WeComBaseURL}}, "TELEGRAM_BASE_URL": {{Value: s.TelegramBaseURL}},
		"DISCORD_BASE_URL": {{Value: s.DiscordBaseURL}}, "SLACK_BASE_URL": {{Value: s.SlackBaseURL}},
	}
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			bad("PUBLIC_URL", "%q is not an http(s) URL without credentials, query or fragment, such as https://bot.example.com", s.PublicURL)
		}
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

// validateAccounts checks that the variables of one account agree: an ID
// has its secret and the reverse, and names given to two kinds of account
// (a WeCom app and robot, a Discord bot and webhook) differ.
func (s Channels) validateAccounts(bad report) {
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
	pair("FEISHU_APP_ID", s.FeishuAppID.Names(), "FEISHU_APP_SECRET", s.FeishuAppSecret.Names())
	pair("QQ_APP_ID", s.QQAppID.Names(), "QQ_APP_SECRET", s.QQAppSecret.Names())
	pair("DINGTALK_CLIENT_ID", s.DingTalkClientID.Names(), "DINGTALK_CLIENT_SECRET", s.DingTalkClientSecret.Names())
	pair("WECOM_CORP_ID", s.WeComCorpID.Names(), "WECOM_SECRET", s.WeComSecret.Names())
	pair("WECOM_CORP_ID", s.WeComCorpID.Names(), "WECOM_AGENT_ID", s.WeComAgentID.Names())
	for _, a := range s.WeComAgentID {
		if _, err := strconv.ParseInt(a.Value, 10, 64); err != nil {
			bad("WECOM_AGENT_ID", "account %q: the AgentId is a number, such as 1000002", a.Name)
		}
	}
	for _, a := range s.WebhookSecret {
		if _, ok := s.WebhookURL.Lookup(a.Name); !ok {
			bad("WEBHOOK_SECRET", "account %q has no TOOLSVC_WEBHOOK_URL", a.Name)
		}
	}
	for _, a := range s.DingTalkRobotCode {
		if _, ok := s.DingTalkClientID.Lookup(a.Name); !ok {
			bad("DINGTALK_ROBOT_CODE", "account %q has no TOOLSVC_DINGTALK_CLIENT_ID", a.Name)
		}
	}
	for _, a := range s.WeComWebhookURL {
		if _, ok := s.WeComCorpID.Lookup(a.Name); ok {
			bad("WECOM_WEBHOOK_URL", "account %q is also a WeCom app (TOOLSVC_WECOM_CORP_ID); give the robot another name", a.Name)
		}
	}
	for _, a := range s.DiscordWebhookURL {
		if _, ok := s.DiscordBotToken.Lookup(a.Name); ok {
			bad("DISCORD_WEBHOOK_URL", "account %q is also a Discord bot (TOOLSVC_DISCORD_BOT_TOKEN); give the webhook another name", a.Name)
		}
	}
}

// Replicas is how several toolsvc processes share sub-agent tasks and
// conversations.
type Replicas struct {
	DatabaseURL Secret        `env:"DATABASE_URL" desc:"PostgreSQL URL (postgres://user:password@host:5432/db?sslmode=require) where sub-agent tasks, their events and send_message conversations are kept, so that every replica answers for every task; empty: they stay in DATA_DIR as on one machine. Start-up fails when the database cannot be reached; migrations run at start"`
	ReplicaID   string        `env:"REPLICA_ID" desc:"this process's name among the replicas, in audit records, task rows and logs; empty: the host name and a random suffix"`
	AgentLease  time.Duration `env:"AGENT_LEASE" default:"30s" desc:"with DATABASE_URL: a running task whose replica has not renewed it for this long (it died or lost the database) is marked interrupted by another replica; renewed every third of it"`
}

func (s Replicas) validate(bad report) {
	if s.DatabaseURL != "" {
		if u, err := url.Parse(string(s.DatabaseURL)); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			bad("DATABASE_URL", "is not a postgres:// URL such as postgres://toolsvc@db:5432/toolsvc")
		}
	}
	if len(s.ReplicaID) > 100 {
		bad("REPLICA_ID", "must be at most 100 characters")
	}
	if s.AgentLease < time.Second {
		bad("AGENT_LEASE", "must be at least 1s")
	}
}
