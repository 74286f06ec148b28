package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSecretValues(t *testing.T) {
	c := Config{
		Access: Access{APIKeys: APIKeys{{"one", "key-one-0123456789"}, {KeyName("key-two-0123456789"), "key-two-0123456789"}}, AdminKeys: APIKeys{{"root", "admin-key-0123456789"}}},
		Server: Server{Workspace: "/ws"},
	}
	env := []string{
		"TOOLSVC_LLM_API_KEY=llm-key-0123456789",
		"TOOLSVC_TELEGRAM_TOKEN=tg-token-0123456789",
		"TOOLSVC_SMTP_PASSWORD=smtp-pass-0123",
		"TOOLSVC_WEBHOOK_SECRETS=hook-a-0123456789,hook-b-0123456789",
		"TOOLSVC_LLM_API_KEY_FILE=/run/secrets/llm",
		"TOOLSVC_WORKSPACE=/ws",
		"OTHER_API_KEY=not-ours-0123456789",
		"TOOLSVC_EMPTY_TOKEN=",
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20otlp-token-0123456789,x-honeycomb-team=hc-key-0123456789",
	}
	got := c.secretValues(env)
	for _, want := range []string{
		"key-one-0123456789", "key-two-0123456789", "admin-key-0123456789", "llm-key-0123456789", "tg-token-0123456789",
		"smtp-pass-0123", "hook-a-0123456789", "hook-b-0123456789",
		"otlp-token-0123456789", "Bearer otlp-token-0123456789", "hc-key-0123456789",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretValues misses %q: %q", want, got)
		}
	}
	for _, not := range []string{"/run/secrets/llm", "/ws", "not-ours-0123456789", ""} {
		if slices.Contains(got, not) {
			t.Errorf("SecretValues holds %q, which is no secret of the service: %q", not, got)
		}
	}
}

// TestSecretFieldsNamed makes sure a field added to Config whose variable
// is named like a secret is collected without anyone listing it.
func TestSecretFieldsNamed(t *testing.T) {
	c := Config{}
	if got := c.secretValues(nil); len(got) != 0 {
		t.Fatalf("empty config: %q", got)
	}
	c.APIKeys = APIKeys{{"a", "a-key-that-is-long-enough"}}
	if got := c.secretValues(nil); !slices.Equal(got, []string{"a-key-that-is-long-enough"}) {
		t.Fatalf("got %q", got)
	}
}

func TestCheckFolders(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// A link outside the workspace that points into it.
	link := filepath.Join(base, "link-to-ws")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ws, data, want string
	}{
		{"sibling", ws, filepath.Join(base, "data"), ""},
		{"sibling with shared prefix", ws, ws + "-data", ""},
		{"inside", ws, filepath.Join(ws, "data"), "is inside the workspace"},
		{"inside, not yet made", ws, filepath.Join(ws, "a", "b", "data"), "is inside the workspace"},
		{"same", ws, ws, "is the workspace"},
		{"same, written differently", ws, filepath.Join(ws, "x", ".."), "is the workspace"},
		{"inside through a link", ws, filepath.Join(link, "data"), "is inside the workspace"},
		{"link to the workspace", ws, link, "is the workspace"},
		{"workspace inside data", filepath.Join(base, "data", "ws"), filepath.Join(base, "data"), "contains the workspace"},
		{"workspace is a link into data", link, base, "contains the workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Server{Workspace: tt.ws, DataDir: tt.data}.CheckFolders()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted; want %q", tt.want)
			case tt.want != "" && (!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "TOOLSVC_DATA_DIR")):
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestChannelAccounts(t *testing.T) {
	var a Accounts
	if err := a.Decode("cli_main"); err != nil || len(a) != 1 || a[0] != (Account{"default", "cli_main"}) {
		t.Fatalf("bare value: %v %v", a, err)
	}
	if err := a.Decode("ops=cli_ops, default = cli_main"); err != nil || a.Names()[0] != "ops" {
		t.Fatalf("pairs: %v %v", a, err)
	}
	if v, ok := a.Lookup("default"); !ok || v != "cli_main" {
		t.Errorf("lookup: %q %v", v, ok)
	}
	// A URL's query is no account name: the value is taken whole.
	if err := a.Decode("https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=abc"); err != nil || a[0].Name != "default" || a[0].Value != "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=abc" {
		t.Errorf("URL: %v %v", a, err)
	}
	if err := a.Decode("x=1,x=2"); err == nil {
		t.Error("an account given twice was accepted")
	}

	c := Config{Channels: Channels{
		FeishuAppID:     Accounts{{"default", "cli_a"}, {"ops", "cli_b"}},
		FeishuAppSecret: SecretAccounts{{"default", "feishu-secret-a"}, {"ops", "feishu-secret-b"}},
		WeComWebhookURL: SecretAccounts{{"default", "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=robot-key"}},
		WebhookURL:      SecretAccounts{{"default", "https://hooks.example/in"}, {"discord", "https://discord.com/api/webhooks/1234/aVeryLongWebhookToken_0123"}},
	}}
	got := c.secretValues(nil)
	for _, want := range []string{"feishu-secret-a", "feishu-secret-b", "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=robot-key", "https://hooks.example/in",
		"robot-key", "aVeryLongWebhookToken_0123"} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretValues misses %q", want)
		}
	}
	for _, not := range []string{"cli_a", "webhooks", "in", "1234"} {
		if slices.Contains(got, not) {
			t.Errorf("%q counted as a secret", not)
		}
	}
	if s := fmt.Sprint(c.FeishuAppSecret); strings.Contains(s, "feishu-secret") {
		t.Errorf("secrets print: %s", s)
	}
	if !c.ChannelsEnabled() || (Config{}).ChannelsEnabled() {
		t.Error("ChannelsEnabled")
	}
}

func TestChannelValidation(t *testing.T) {
	t.Setenv("TOOLSVC_FEISHU_APP_ID", "default=cli_a,ops=cli_b")
	t.Setenv("TOOLSVC_FEISHU_APP_SECRET", "feishu-secret-a")
	t.Setenv("TOOLSVC_WEBHOOK_URL", "ftp://hooks.example/in")
	t.Setenv("TOOLSVC_WORKSPACE", t.TempDir())
	t.Setenv("TOOLSVC_DATA_DIR", t.TempDir())
	_, err := Load()
	if err == nil {
		t.Fatal("mismatched accounts accepted")
	}
	for _, want := range []string{`TOOLSVC_FEISHU_APP_SECRET: account "ops"`, "TOOLSVC_WEBHOOK_URL: is not an http(s) URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "feishu-secret-a") || strings.Contains(err.Error(), "hooks.example") {
		t.Errorf("error repeats a secret: %v", err)
	}
}
