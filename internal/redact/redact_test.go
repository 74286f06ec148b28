package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	r := New("sk-live-0123456789", "short", `pa"ss\word-123`)
	tests := []struct{ in, want string }{
		{"key=sk-live-0123456789.", "key=" + Mask + "."},
		{"short stays", "short stays"}, // under eight characters: ignored
		{"twice sk-live-0123456789sk-live-0123456789", "twice " + Mask + Mask},
		{`raw pa"ss\word-123`, "raw " + Mask},
		{`{"p":"pa\"ss\\word-123"}`, `{"p":"` + Mask + `"}`}, // as JSON writes it
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var none *Redactor
	if got := none.String("sk-live-0123456789"); got != "sk-live-0123456789" {
		t.Errorf("nil Redactor changed the text: %q", got)
	}
}

func TestProgressSplitSecret(t *testing.T) {
	const secret = "tok-ABCDEFGHIJKLMNOP"
	r := New(secret)
	var got []string
	send, flush := r.Progress(func(event, data string) { got = append(got, event+":"+data) })
	// The secret arrives cut in three, with another event in between.
	send("output", "first tok-ABC")
	send("status", "busy")
	send("output", "DEFGHIJ")
	send("output", "KLMNOP last")
	send("output", " ends with tok-A")
	flush()
	all := strings.Join(got, "|")
	if strings.Contains(strings.ReplaceAll(all, "|", ""), "ABCDEFGHIJ") {
		t.Fatalf("secret leaked across events: %q", got)
	}
	var out strings.Builder
	for _, g := range got {
		if d, ok := strings.CutPrefix(g, "output:"); ok {
			out.WriteString(d)
		}
	}
	if want := "first " + Mask + " last ends with tok-A"; out.String() != want {
		t.Fatalf("output events joined = %q, want %q", out.String(), want)
	}
	if !strings.Contains(all, "status:busy") {
		t.Fatalf("other event lost: %q", got)
	}
}

func TestWriter(t *testing.T) {
	r := New("hunter2hunter2")
	var buf bytes.Buffer
	w := r.Writer(&buf)
	line := []byte(`{"level":"info","arg":"hunter2hunter2"}` + "\n")
	n, err := w.Write(line)
	if err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(line))
	}
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), Mask) {
		t.Fatalf("written %q", buf.String())
	}
}

func TestSecretName(t *testing.T) {
	secret := []string{
		"key", "token", "secret", "password", "pass", "passwd", "credential", "credentials",
		"api_key", "apikey", "apiKey", "APIKey", "access_token", "accessToken", "auth", "authorization",
		"Authorization", "db_password", "DB_PASSWORD", "X-Api-Key", "x-api-key", "client_secret",
		"dbpassword", "refresh-token", "private_key", "my.pass", "cookie", "Set-Cookie",
	}
	plain := []string{
		"", "path", "content", "keywords", "author", "passage", "command", "url", "monkey",
		"old_str", "max_results", "working_dir", "compass", "bypass_cache",
	}
	for _, n := range secret {
		if !SecretName(n) {
			t.Errorf("SecretName(%q) = false, want true", n)
		}
		if b, _ := json.Marshal(map[string]int{n: 1}); n != "" && !MentionsSecretName(b) {
			t.Errorf("MentionsSecretName misses %q", n)
		}
	}
	for _, n := range plain {
		if SecretName(n) {
			t.Errorf("SecretName(%q) = true, want false", n)
		}
	}
	if MentionsSecretName([]byte(`{"path":"a.txt","content":"x"}`)) {
		t.Error("MentionsSecretName: false alarm on plain arguments")
	}
	if !MentionsSecretName([]byte(`{"p\u0061ssword":"x"}`)) || !MentionsSecretName([]byte(`{"DB_PASSWORD":"x"}`)) {
		t.Error("MentionsSecretName misses an escaped or upper-case name")
	}
}

// FuzzMentionsSecretName: the one-pass test finds what a search for each
// word in the lower-cased text finds.
func FuzzMentionsSecretName(f *testing.F) {
	for _, s := range []string{`{"path":"a.txt"}`, `{"X-Api-KEY":1}`, `"p\u0061ss"`, `\`, "coo", "Cookie", "pw", "pwd", "tokens"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := bytes.Contains(b, []byte(`\u`))
		for _, w := range []string{"key", "pass", "pwd", "secret", "token", "cred", "auth", "cookie"} {
			want = want || bytes.Contains(asciiLower(b), []byte(w))
		}
		if got := MentionsSecretName(b); got != want {
			t.Errorf("MentionsSecretName(%q) = %v, want %v", b, got, want)
		}
	})
}

func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func TestSecretVariable(t *testing.T) {
	for name, want := range map[string]bool{
		"TOOLSVC_API_KEYS":         true,
		"TOOLSVC_LLM_API_KEY":      true,
		"TOOLSVC_TELEGRAM_TOKEN":   true,
		"TOOLSVC_SMTP_PASSWORD":    true,
		"TOOLSVC_WEBHOOK_SECRET":   true,
		"TOOLSVC_LLM_API_KEY_FILE": false,
		"TOOLSVC_WORKSPACE":        false,
		"TOOLSVC_KEYWORDS":         false,
		"TOOLSVC_MAX_TOKENS_X":     false,
	} {
		if got := SecretVariable(name); got != want {
			t.Errorf("SecretVariable(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestAdd: a secret added later is redacted from then on, by String, by
// Progress and by a Writer made before it was added.
func TestAdd(t *testing.T) {
	r := New("first-secret-1")
	var buf strings.Builder
	w := r.Writer(&buf)
	r.Add("later-secret-2")
	if got := r.String("first-secret-1 later-secret-2"); got != Mask+" "+Mask {
		t.Errorf("String = %q", got)
	}
	fmt.Fprint(w, "log later-secret-2\n")
	if strings.Contains(buf.String(), "later-secret-2") {
		t.Errorf("writer: %q", buf.String())
	}
	var got strings.Builder
	send, flush := r.Progress(func(_, d string) { got.WriteString(d) })
	send("output", "x later-sec")
	send("output", "ret-2 y")
	flush()
	if got.String() != "x "+Mask+" y" {
		t.Errorf("progress = %q", got.String())
	}
	// A redactor with no secret at first still redacts what is added.
	empty := New()
	var b2 strings.Builder
	w2 := empty.Writer(&b2)
	empty.Add("added-afterwards")
	fmt.Fprint(w2, "added-afterwards")
	if b2.String() != Mask {
		t.Errorf("empty writer = %q", b2.String())
	}
}
