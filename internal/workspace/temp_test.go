package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestTempFolderHeals replaces the temporary folder as a command could and
// checks that start-up, a write and the readiness probe each put a real
// folder back, remove a link as a link, and touch nothing outside the
// workspace.
func TestTempFolderHeals(t *testing.T) {
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep.txt")
	if err := os.WriteFile(keep, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	plants := []struct {
		name, want string
		plant      func(t *testing.T, tmp string)
	}{
		{"file", "a file of 7 bytes", func(t *testing.T, tmp string) {
			if err := os.WriteFile(tmp, []byte("planted"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"link to a folder outside", "a symbolic link", func(t *testing.T, tmp string) {
			if err := os.Symlink(outside, tmp); err != nil {
				t.Fatal(err)
			}
		}},
		{"link to /", "a symbolic link", func(t *testing.T, tmp string) {
			if err := os.Symlink("/", tmp); err != nil {
				t.Fatal(err)
			}
		}},
		{"dangling link", "a symbolic link", func(t *testing.T, tmp string) {
			if err := os.Symlink(filepath.Join(outside, "nowhere"), tmp); err != nil {
				t.Fatal(err)
			}
		}},
	}
	if runtime.GOOS != "windows" {
		plants = append(plants, struct {
			name, want string
			plant      func(t *testing.T, tmp string)
		}{"named pipe", "a named pipe", func(t *testing.T, tmp string) { mkfifo(t, tmp) }})
	}
	heal := []struct {
		name string
		run  func(t *testing.T, dir string, o Options) *Workspace
	}{
		{"open", func(t *testing.T, dir string, o Options) *Workspace { return open(t, dir, o) }},
		{"write", func(t *testing.T, dir string, o Options) *Workspace {
			w := open(t, dir, Options{Restrict: true}) // planted after the start
			w.warn = o.Warn
			return w
		}},
		{"probe", func(t *testing.T, dir string, o Options) *Workspace {
			w := open(t, dir, Options{Restrict: true})
			w.warn = o.Warn
			return w
		}},
	}
	for _, h := range heal {
		for _, p := range plants {
			t.Run(h.name+"/"+p.name, func(t *testing.T) {
				dir := t.TempDir()
				tmp := filepath.Join(dir, TempDir)
				var warned []string
				o := Options{Restrict: true, Warn: func(m string) { warned = append(warned, m) }}
				var w *Workspace
				if h.name == "open" {
					p.plant(t, tmp)
					w = h.run(t, dir, o)
				} else {
					w = h.run(t, dir, o)
					p.plant(t, tmp)
				}
				before := listing(t, outside)
				switch h.name {
				case "write":
					path, err := w.Resolve("a.txt")
					if err != nil {
						t.Fatal(err)
					}
					if err := w.WriteFile(path, []byte("x"), false); err != nil {
						t.Fatal(err)
					}
				case "probe":
					if err := w.Probe(); err != nil {
						t.Fatalf("Probe after the repair: %v", err)
					}
				}
				if fi, err := os.Lstat(tmp); err != nil || !fi.IsDir() {
					t.Fatalf("%s is not a folder again: %v, %v", TempDir, fi, err)
				}
				if len(warned) != 1 || !strings.Contains(warned[0], p.want) {
					t.Errorf("warnings %q, want one naming %q", warned, p.want)
				}
				if after := listing(t, outside); after != before {
					t.Errorf("the folder outside changed:\nbefore %s\nafter  %s", before, after)
				}
				if b, err := os.ReadFile(keep); err != nil || string(b) != "outside" {
					t.Errorf("the file outside changed: %q, %v", b, err)
				}
				if _, err := os.Stat("/"); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestTempFolderKept leaves a real folder, and what is in it, alone.
func TestTempFolderKept(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, TempDir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	var warned []string
	w := open(t, dir, Options{Restrict: true, Warn: func(m string) { warned = append(warned, m) }})
	if err := w.Probe(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TempDir, "sub")); err != nil || len(warned) != 0 {
		t.Errorf("a good temporary folder was touched: %v, warnings %q", err, warned)
	}
}

// TestTempFolderHealsConcurrently repairs from many writers at once: each
// write succeeds, and one folder is left.
func TestTempFolderHealsConcurrently(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{Restrict: true})
	for round := 0; round < 20; round++ {
		if err := os.Symlink("/", filepath.Join(dir, TempDir+".new")); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(filepath.Join(dir, TempDir))
		if err := os.Rename(filepath.Join(dir, TempDir+".new"), filepath.Join(dir, TempDir)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path, err := w.Resolve(fmt.Sprintf("f%d.txt", i))
				if err == nil {
					err = w.WriteFile(path, []byte("x"), false)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if fi, err := os.Lstat(filepath.Join(dir, TempDir)); err != nil || !fi.IsDir() {
			t.Fatalf("round %d: not a folder: %v, %v", round, fi, err)
		}
	}
}

func open(t *testing.T, dir string, o Options) *Workspace {
	t.Helper()
	w, err := OpenWith(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// listing describes every entry under dir.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s %d; ", p, fi.Mode(), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
