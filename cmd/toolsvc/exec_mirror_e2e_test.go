package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
)

// These tests run real package and source tools (git, npm, node) through
// the exec allowlist against loopback mirrors served over HTTPS, as an
// operator would list an internal mirror: the command reaches the mirror
// only through the service's proxy (a CONNECT tunnel, since the URLs are
// https), and trusts the mirror's certificate only through a CA file in
// the workspace that the command line names, so that nothing changes in
// the machine's trust store.

// needTools skips the test where one of the programs is missing, except
// under CI (CI=true), where it fails: the mirrors must be tested there.
func needTools(t *testing.T, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing under CI: install it (scripts/test.sh does)", p)
			}
			t.Skipf("NOT TESTED: %s is not installed", p)
		}
	}
}

// localhostTLS makes a throwaway CA and a leaf certificate it signs for
// the DNS name "localhost" (and nothing else: the commands must name the
// mirror as the allowlist does), and returns the CA in PEM, for the
// commands to trust, and the leaf with its key, for the mirrors to serve.
func localhostTLS(t *testing.T) (caPEM []byte, leaf tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "toolsvc test mirror CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

// requestLog keeps the requests a mirror got ("GET /path"), for the
// checks and for the failure messages.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.RequestURI())
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// has says whether a request line was seen.
func (l *requestLog) has(line string) bool {
	for _, r := range l.all() {
		if r == line {
			return true
		}
	}
	return false
}

// tlsMirror serves h over HTTPS on loopback with leaf, logging each
// request, and returns its port.
func tlsMirror(t *testing.T, leaf tls.Certificate, h http.Handler) (port int, log *requestLog) {
	t.Helper()
	log = &requestLog{}
	srv := httptest.NewUnstartedServer(log.wrap(h))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, log
}

// gitIn runs git in dir with a configuration of its own (no global or
// system files of the machine), failing the test on an error.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// gitMirror makes a bare repository repo.git with one commit holding
// file (with content) in a folder of its own, and returns a handler that
// serves it as git's smart HTTP protocol does: git http-backend run as a
// CGI program.
func gitMirror(t *testing.T, file, content string) http.Handler {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git-http-backend is missing under CI: %v", err)
		}
		t.Skipf("NOT TESTED: git-http-backend is not installed: %v", err)
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "add", file)
	gitIn(t, work, "commit", "-q", "-m", "one commit for the mirror")
	gitIn(t, root, "clone", "-q", "--bare", "work", "repo.git")
	return &cgi.Handler{
		Path: backend,
		Dir:  root,
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1", // serve repo.git without a git-daemon-export-ok file
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + root,
		},
	}
}

// TestExecMirrorGit: git clones over HTTPS from a loopback mirror the
// allowlist names (through the proxy's CONNECT tunnel, trusting the
// mirror's CA by the command line), and the same clone from a port the
// allowlist does not name is refused by the proxy before it reaches that
// server, with the refusal named in the result.
func TestExecMirrorGit(t *testing.T) {
	t.Parallel()
	needTools(t, "git")
	caPEM, leaf := localhostTLS(t)
	const file, content = "README.md", "hello from the git mirror\n"
	h := gitMirror(t, file, content)
	port, log := tlsMirror(t, leaf, h)
	otherPort, otherLog := tlsMirror(t, leaf, h) // the same repository, on a port not listed
	s := startAllowlisted(t, map[string]string{
		"EXEC_NET_ALLOW":  fmt.Sprintf("localhost:%d", port),
		"NET_ALLOW_HOSTS": "localhost", // the operator opens loopback for that name
	})
	s.writeWS(t, "ca.pem", string(caPEM))

	clone := func(port int, into string) string {
		return fmt.Sprintf("git -c http.sslCAInfo=ca.pem clone https://localhost:%d/repo.git %s && cat %s/%s", port, into, into, file)
	}
	res := s.invoke(t, "exec", execArgs(clone(port, "r"), "timeout", 120))
	// A command that fails is still a successful call whose result says
	// COMMAND FAILED, so the text is checked as well as the status.
	if res.Status != registry.StatusSuccess || strings.Contains(res.Result, "COMMAND FAILED") || !strings.Contains(res.Result, strings.TrimSpace(content)) {
		t.Fatalf("git clone from the listed mirror: %s: %s\nmirror requests: %q\nlogs:\n%s", res.Status, res.Result, log.all(), s.Logs())
	}
	if !log.has("GET /repo.git/info/refs?service=git-upload-pack") || !log.has("POST /repo.git/git-upload-pack") {
		t.Errorf("git did not speak smart HTTP to the mirror: %q", log.all())
	}
	if strings.Contains(res.Result, "NETWORK:") {
		t.Errorf("the allowed clone reports a refusal: %s", res.Result)
	}

	out := s.invoke(t, "exec", execArgs(clone(otherPort, "r2"), "timeout", 120)).Result
	assertContains(t, "the clone from a port not listed", out,
		"COMMAND FAILED",
		fmt.Sprintf("refused: localhost:%d (no allow rule matches port %d", otherPort, otherPort),
		"NETWORK: the allowlist refused 1 connection(s)")
	if reqs := otherLog.all(); len(reqs) != 0 {
		t.Errorf("the unlisted port was reached: %q", reqs)
	}
}

// npmPackage is a package as npm's registry serves it: its tarball (a
// gzipped tar whose files are under package/) and the packument that
// points to it.
type npmPackage struct {
	name, version string
	tarball       []byte
}

// packTarball builds the tarball of a package with its package.json and
// index.js, as npm pack lays it out.
func packTarball(t *testing.T, name, version, index string) []byte {
	t.Helper()
	manifest, err := json.Marshal(map[string]string{"name": name, "version": version, "main": "index.js"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		data []byte
	}{{"package/package.json", manifest}, {"package/index.js", []byte(index)}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(499162500, 0), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// npmRegistry serves one package as npm's public registry does, the
// little of its API that npm install uses
// (https://github.com/npm/registry/blob/main/docs/REGISTRY-API.md), as
// npm --loglevel http shows it fetching: GET /<name> is the packument
// (the package's versions, each with dist.tarball, dist.shasum and
// dist.integrity, and dist-tags.latest), and GET /<name>/-/<name>-<v>.tgz
// the tarball it names. Anything else is 404, as the registry answers an
// unknown package. The packument's tarball URLs begin with the host the
// request named (localhost:<port>), since the port is known only once the
// server listens.
func npmRegistry(pkg npmPackage) http.Handler {
	sha1sum := sha1.Sum(pkg.tarball)
	sha512sum := sha512.Sum512(pkg.tarball)
	file := fmt.Sprintf("%s-%s.tgz", pkg.name, pkg.version)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/" + pkg.name:
			doc := map[string]any{
				"name":      pkg.name,
				"dist-tags": map[string]string{"latest": pkg.version},
				"versions": map[string]any{
					pkg.version: map[string]any{
						"name":    pkg.name,
						"version": pkg.version,
						"main":    "index.js",
						"dist": map[string]string{
							"tarball":   "https://" + r.Host + "/" + pkg.name + "/-/" + file,
							"shasum":    hex.EncodeToString(sha1sum[:]),
							"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
						},
					},
				},
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
		case "/" + pkg.name + "/-/" + file:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(pkg.tarball)
		default:
			http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
		}
	})
}

// TestExecMirrorNpm: npm installs a package over HTTPS from a loopback
// registry the allowlist names (through the proxy, trusting the
// registry's CA with --cafile), and node then loads it.
func TestExecMirrorNpm(t *testing.T) {
	t.Parallel()
	needTools(t, "npm", "node")
	caPEM, leaf := localhostTLS(t)
	const name, version = "toolsvc-mirror-greeting", "1.0.0"
	pkg := npmPackage{name: name, version: version,
		tarball: packTarball(t, name, version, "module.exports = () => 'hello from the npm mirror';\n")}
	port, log := tlsMirror(t, leaf, npmRegistry(pkg))
	base := fmt.Sprintf("https://localhost:%d/", port)
	s := startAllowlisted(t, map[string]string{
		"EXEC_NET_ALLOW":  fmt.Sprintf("localhost:%d", port),
		"NET_ALLOW_HOSTS": "localhost", // the operator opens loopback for that name
	})
	s.writeWS(t, "ca.pem", string(caPEM))
	s.writeWS(t, "app/package.json", `{"name": "app", "version": "1.0.0", "private": true}`+"\n")

	// The cache is the call's own HOME's (~/.npm), fresh each call, so the
	// tarball must come from the mirror.
	cmd := fmt.Sprintf("cd app && npm install --registry %s --cafile ../ca.pem --no-audit --no-fund --loglevel http %s && node -e \"console.log(require('%s')())\"", base, name, name)
	res := s.invoke(t, "exec", execArgs(cmd, "timeout", 180))
	if res.Status != registry.StatusSuccess || strings.Contains(res.Result, "COMMAND FAILED") || !strings.Contains(res.Result, "hello from the npm mirror") {
		t.Fatalf("npm install from the listed registry: %s: %s\nregistry requests: %q\nlogs:\n%s", res.Status, res.Result, log.all(), s.Logs())
	}
	for _, want := range []string{"GET /" + name, fmt.Sprintf("GET /%s/-/%s-%s.tgz", name, name, version)} {
		if !log.has(want) {
			t.Errorf("the registry did not get %q: %q", want, log.all())
		}
	}
	// npm's own log (--loglevel http) of what it fetched, and from where.
	assertContains(t, "npm's log", res.Result,
		"npm http fetch GET 200 "+base+name+" ",
		"npm http fetch GET 200 "+base+name+"/-/"+name+"-"+version+".tgz ")
	if strings.Contains(res.Result, "NETWORK:") {
		t.Errorf("the install reports a refusal: %s", res.Result)
	}
	lock := mustSucceed(t, s.invoke(t, "exec", execArgs("cat app/package-lock.json")))
	if !strings.Contains(lock, base+name+"/-/"+name+"-"+version+".tgz") {
		t.Errorf("package-lock.json does not resolve the package to the mirror:\n%s", lock)
	}
}
