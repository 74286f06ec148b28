package gctune

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupLimit(t *testing.T) {
	write := func(t *testing.T, name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		proc   string
		limits map[string]string // group folder -> memory.max
		want   int64
	}{
		{"own limit", "0::/svc/toolsvc\n", map[string]string{"svc/toolsvc": "1073741824\n", "svc": "max\n"}, 1 << 30},
		{"a parent's lower limit", "0::/svc/toolsvc\n", map[string]string{"svc/toolsvc": "max\n", "svc": "536870912\n"}, 512 << 20},
		{"the lowest of several", "0::/a/b/c\n", map[string]string{"a/b/c": "900\n", "a/b": "800\n", "a": "1000\n"}, 800},
		{"no limit", "0::/svc\n", map[string]string{"svc": "max\n"}, 0},
		{"cgroup v1 only", "12:memory:/svc\n", map[string]string{"svc": "1000\n"}, 0},
		{"root group", "0::/\n", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "cgroup"), c.proc)
			for g, v := range c.limits {
				write(t, filepath.Join(dir, "fs", g, "memory.max"), v)
			}
			if got := cgroupLimit(filepath.Join(dir, "cgroup"), filepath.Join(dir, "fs")); got != c.want {
				t.Errorf("cgroupLimit = %d, want %d", got, c.want)
			}
		})
	}
}

func TestLimitMemoryKeepsTheOperatorsChoice(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	if got := LimitMemory(); got != 0 {
		t.Errorf("LimitMemory with GOMEMLIMIT set = %d, want 0", got)
	}
}
