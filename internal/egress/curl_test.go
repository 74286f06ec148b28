package egress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/netguard"
)

// curlRun runs curl with only the given environment (no NO_PROXY, no
// curlrc: -q) and returns its exit code, standard output and error.
func curlRun(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", append([]string{"-q", "-sS", "--max-time", "20"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestCurl: curl, as a command would run it, through the proxy variables:
// HTTPS to a TLS server by name, plain HTTP through http_proxy and
// ALL_PROXY, and refusals whose reason shows in curl's own output.
// curl reads http_proxy only in lower case (HTTP_PROXY is ignored, as a
// CGI program could be handed it by a request header), so the service
// must set both spellings.
func TestCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	cert := newTestCert(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, cert.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.Host+r.URL.Path)
	})
	tlsSrv := newTLSServer(t, cert, handler)
	plain := httptest.NewServer(handler)
	t.Cleanup(plain.Close)
	listed := newCountingServer(t)
	r := newRig(t, rigConfig{
		allow: []string{"mirror.test", "listed.test"},
		guard: netguard.Options{AllowHosts: []string{"mirror.test", "listed.test"}},
	})
	r.redirect("mirror.test", 443, tlsSrv.Listener.Addr().String())
	r.redirect("mirror.test", 80, plain.Listener.Addr().String())
	r.redirect("listed.test", 443, listed.addr())
	proxy := "http://" + r.addr

	cases := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"https via HTTPS_PROXY", []string{"HTTPS_PROXY=" + proxy}, []string{"--cacert", caFile, "https://mirror.test/a"}, 0, "hello mirror.test/a", ""},
		{"http via http_proxy", []string{"http_proxy=" + proxy}, []string{"http://mirror.test/b"}, 0, "hello mirror.test/b", ""},
		{"http via ALL_PROXY", []string{"ALL_PROXY=" + proxy}, []string{"http://mirror.test/c"}, 0, "hello mirror.test/c", ""},
		{"https via ALL_PROXY", []string{"ALL_PROXY=" + proxy}, []string{"--cacert", caFile, "https://mirror.test/d"}, 0, "hello mirror.test/d", ""},
		{"https refused", []string{"HTTPS_PROXY=" + proxy}, []string{"-v", "--cacert", caFile, "https://evil.test/"}, 56, "",
			"X-Toolsvc-Refused: refused: evil.test:443 (no allow rule matches)"},
		{"http refused", []string{"http_proxy=" + proxy}, []string{"-f", "-v", "http://evil.test/"}, 22, "",
			"< HTTP/1.1 403 refused: evil.test:80 (no allow rule matches)"},
		{"http refused, body", []string{"http_proxy=" + proxy}, []string{"http://evil.test/"}, 0, "refused: evil.test:80 (no allow rule matches)\n", ""},
		{"port refused", []string{"HTTPS_PROXY=" + proxy}, []string{"-v", "--cacert", caFile, "https://mirror.test:8443/"}, 56, "",
			"X-Toolsvc-Refused: refused: mirror.test:8443 (no allow rule matches port 8443"},
		// Domain fronting with curl's own --connect-to: the CONNECT names
		// listed.test, the ClientHello evil.test.
		{"fronting", []string{"HTTPS_PROXY=" + proxy}, []string{"--cacert", caFile, "--connect-to", "evil.test:443:listed.test:443", "https://evil.test/"}, 35, "",
			"alert access denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := curlRun(t, c.env, c.args...)
			if code != c.code || (c.code == 0 && stdout != c.stdout) || !strings.Contains(stderr, c.stderr) {
				t.Errorf("curl %s: exit %d (want %d)\nstdout %q (want %q)\nstderr %s\n(want %q in it)", strings.Join(c.args, " "), code, c.code, stdout, c.stdout, stderr, c.stderr)
			}
		})
	}
	if n := listed.bytes.Load(); n != 0 {
		t.Errorf("%d bytes of the fronting attempt reached listed.test", n)
	}
	if ref := r.lastRefusal(t); !strings.Contains(ref.Reason, "names evil.test (SNI), not listed.test") {
		t.Errorf("last refusal %+v", ref)
	}
}

// TestClientsShowReason: npm and Python's urllib (what pip's HTTP stack
// builds on) put the proxy's reason in their own errors, from the status
// line of a refused CONNECT or plain request.
func TestClientsShowReason(t *testing.T) {
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	proxy := "http://" + r.addr
	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s is not installed", name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HTTPS_PROXY=" + proxy, "HTTP_PROXY=" + proxy,
			"npm_config_update_notifier=false", "npm_config_cache=" + t.TempDir()}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	t.Run("npm", func(t *testing.T) {
		out := run(t, "npm", "view", "left-pad", "--registry", "https://evil.test/", "--fetch-retries", "0")
		if !strings.Contains(out, "refused: evil.test:443 (no allow rule matches)") {
			t.Errorf("npm's output lacks the reason:\n%s", out)
		}
	})
	t.Run("python", func(t *testing.T) {
		script := `
import urllib.request
o = urllib.request.build_opener(urllib.request.ProxyHandler({"https": "` + proxy + `", "http": "` + proxy + `"}))
for u in ["https://evil.test/", "http://evil.test/"]:
    try:
        o.open(u, timeout=20)
    except Exception as e:
        print(e)
`
		out := run(t, "python3", "-c", script)
		for _, want := range []string{"Tunnel connection failed: 403 refused: evil.test:443 (no allow rule matches)",
			"HTTP Error 403: refused: evil.test:80 (no allow rule matches)"} {
			if !strings.Contains(out, want) {
				t.Errorf("Python's output lacks %q:\n%s", want, out)
			}
		}
	})
}
