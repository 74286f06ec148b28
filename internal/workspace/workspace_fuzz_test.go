package workspace

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// FuzzResolve resolves arbitrary paths in a restricted workspace that holds
// symbolic links leading out (to its parent, to an absolute folder, a loop),
// reached through a link to the workspace itself. Resolve must never panic
// and never return a path outside; opening what it returns must never reach
// a file outside; writing to it must never create or change anything
// outside.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"", ".", "a.txt", "dir/b.txt", "..", "../secret.txt", "/", "/etc/passwd", "dir/../../secret.txt",
		"up/secret.txt", "abs/secret.txt", "other/x", "loop", "loop/x", "dir/./.././dir", "~", "~/x",
		"a\x00b", "//", "./../ws/a.txt", "dir//b.txt", strings.Repeat("a/", 300), "up", "abs", "link-to-file",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	base := f.TempDir()
	ws := filepath.Join(base, "ws")
	other := filepath.Join(base, "other")
	for _, d := range []string{filepath.Join(ws, "dir"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	mustWrite := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	mustWrite(filepath.Join(base, "secret.txt"), "OUTSIDE")
	mustWrite(filepath.Join(other, "x"), "OUTSIDE")
	mustWrite(filepath.Join(ws, "a.txt"), "inside")
	mustWrite(filepath.Join(ws, "dir", "b.txt"), "inside")
	for name, dest := range map[string]string{
		"ws/up": "..", "ws/abs": base, "ws/other": other, "ws/loop": "loop", "ws/dir/up2": "../..",
		"ws/link-to-file": filepath.Join(base, "secret.txt"), "wslink": ws,
	} {
		if err := os.Symlink(dest, filepath.Join(base, name)); err != nil {
			f.Fatal(err)
		}
	}
	w, err := Open(filepath.Join(base, "wslink"), true)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { w.Close() })
	outside := snapshot(f, base, ws)

	f.Fuzz(func(t *testing.T, p string, write bool) {
		got, err := w.Resolve(p)
		if err != nil {
			var e *toolerr.Error
			if !errors.As(err, &e) || e.Code == "" {
				t.Fatalf("Resolve(%q): error without a code: %v", p, err)
			}
			return
		}
		if got.Outside || got.Root != w.Root() {
			t.Fatalf("Resolve(%q) = %+v: outside the workspace", p, got)
		}
		if got.Name != "." && !filepath.IsLocal(got.Name) {
			t.Fatalf("Resolve(%q) = name %q, which is not local", p, got.Name)
		}
		if file, err := got.Open(); err == nil {
			target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(file.Fd())))
			data, _ := io.ReadAll(io.LimitReader(file, 64))
			file.Close()
			if !pathx.Contains(w.Dir(), target) || string(data) == "OUTSIDE" {
				t.Fatalf("Resolve(%q) opened %s (%q), outside the workspace", p, target, data)
			}
		}
		if write {
			_ = w.WriteFile(got, []byte("fuzz"), false)
			if now := snapshot(t, base, ws); !slices.Equal(now, outside) {
				t.Fatalf("writing %q changed the outside: %q, was %q", p, now, outside)
			}
		}
	})
}

// snapshot lists every file outside the workspace under base with its
// content, following no links.
func snapshot(tb testing.TB, base, ws string) []string {
	var out []string
	err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == ws {
			return filepath.SkipDir
		}
		entry := p
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			entry += "=" + string(data)
		}
		out = append(out, entry)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
