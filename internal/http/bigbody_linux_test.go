package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/workspace"
)

// bigChild names the call a child process of BenchmarkBigBodyMemory makes.
const bigChild = "TOOLSVC_BIGBODY_CHILD"

// bigLine is the text a big body repeats: prose and code, with quotes,
// backslashes and tabs that JSON escapes.
const bigLine = "\tfmt.Println(\"a line of \\\"code\\\" and some text\") // über 50 ±\n"

// bigBody is a reader of a call's body whose one string argument, field,
// holds size bytes of text, made as it is read so that the body costs the
// child no memory before the server reads it.
func bigBody(prefix, field string, size int) (io.Reader, int64, int) {
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`, "\n", `\n`).Replace(bigLine)
	n := size / len(bigLine)
	head := prefix + `"` + field + `":"`
	r := io.MultiReader(strings.NewReader(head), &repeatReader{s: esc, n: n}, strings.NewReader(`"}`))
	return r, int64(len(head) + n*len(esc) + 2), n * len(bigLine)
}

type repeatReader struct {
	s   string
	n   int
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 && r.n > 0 {
		c := copy(p, r.s[r.off:])
		p, total, r.off = p[c:], total+c, r.off+c
		if r.off == len(r.s) {
			r.off, r.n = 0, r.n-1
		}
	}
	if total == 0 && r.n == 0 {
		return 0, io.EOF
	}
	return total, nil
}

// procStatus reads a field of /proc/self/status in bytes.
func procStatus(t testing.TB, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestBigBodyChild is the child of BenchmarkBigBodyMemory; it does nothing
// in a plain test run. It makes one big call through the whole handler
// (the audit log and redaction on, as the service runs) and prints its
// peak resident memory above the idle process, and the content's size.
func TestBigBodyChild(t *testing.T) {
	which := os.Getenv(bigChild)
	if which == "" {
		t.Skip("run by BenchmarkBigBodyMemory")
	}
	dir := t.TempDir()
	ws, err := workspace.Open(filepath.Join(dir, "ws"), true)
	if err != nil {
		if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		if ws, err = workspace.Open(filepath.Join(dir, "ws"), true); err != nil {
			t.Fatal(err)
		}
	}
	al, err := audit.New(audit.Options{Dir: filepath.Join(dir, "audit"), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	red := redact.New("a-secret-value-0123456789")
	reg := registry.New(registry.Options{Audit: al, Redact: red.String})
	for _, tool := range []registry.Tool{tools.NewWriteFile(ws), tools.NewEditFile(ws)} {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	h := NewHandler(Options{Registry: reg, Log: zerolog.Nop(), MaxBodyBytes: 80 << 20})
	const size = 50 << 20
	var body io.Reader
	var length int64
	var content int
	switch which {
	case "write_file":
		body, length, content = bigBody(`{"path":"big.txt",`, "content", size)
	case "edit_file":
		if err := os.WriteFile(filepath.Join(dir, "ws", "small.txt"), []byte("one\nTWO\nthree\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		body, length, content = bigBody(`{"path":"small.txt","old_str":"TWO",`, "new_str", size)
	default:
		t.Fatalf("unknown call %q", which)
	}
	// One small call first, so that what every call sets up once is idle.
	warm := httptest.NewRequest(http.MethodPost, "/tools/write_file/invoke", strings.NewReader(`{"path":"warm.txt","content":"x"}`))
	h.ServeHTTP(httptest.NewRecorder(), warm)
	runtime.GC()
	debug.FreeOSMemory()
	idle := procStatus(t, "VmRSS")
	// Reset the high-water mark to the current RSS (proc(5), clear_refs).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset VmHWM: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, "/tools/"+which+"/invoke", body)
	req.ContentLength = length
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"success"`) {
		t.Fatalf("%d %.300s", rec.Code, rec.Body)
	}
	peak := procStatus(t, "VmHWM")
	fmt.Printf("BIGBODY %d %d\n", peak-idle, content)
}

// BenchmarkBigBodyMemory makes one 50 MB write_file (and one edit_file
// whose new_str is 50 MB) in a child process each and reports the peak
// resident memory above the idle process as a multiple of the content
// (the goal: at most 3). The child's high-water mark (VmHWM) is the
// kernel's own figure, so nothing here depends on timing. GOMEMLIMIT and
// GOGC are left as the environment has them.
func BenchmarkBigBodyMemory(b *testing.B) {
	for _, call := range []string{"write_file", "edit_file"} {
		b.Run(call, func(b *testing.B) {
			var ratio float64
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestBigBodyChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), bigChild+"="+call)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
				var peak, content int64
				i := bytes.Index(out, []byte("BIGBODY "))
				if i < 0 {
					b.Fatalf("no figures in\n%s", out)
				}
				if _, err := fmt.Sscanf(string(out[i:]), "BIGBODY %d %d", &peak, &content); err != nil {
					b.Fatal(err)
				}
				ratio = float64(peak) / float64(content)
			}
			b.ReportMetric(ratio, "peak-RSS/content")
		})
	}
}
