package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// TestAuditFailClosed breaks the audit log under a running service and
// calls write_file: by default the call is refused with audit_unavailable
// and the file is not written; with TOOLSVC_AUDIT_REQUIRED=false it is
// written anyway. The log is broken by replacing its journal folder with a
// file (the service notices within a second and cannot make a new one)
// and, where a tmpfs can be mounted, by filling the data folder's disk.
func TestAuditFailClosed(t *testing.T) {
	t.Parallel()
	type breaker struct {
		name  string
		setup func(t *testing.T) (data string, brk func(data string))
	}
	breakers := []breaker{{"journal folder replaced by a file", func(t *testing.T) (string, func(string)) {
		return filepath.Join(t.TempDir(), "data"), func(data string) {
			journal := filepath.Join(data, "audit_logs", ".journal")
			if err := os.RemoveAll(journal); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(journal, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}}}
	probe := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", probe).Run(); err == nil {
		exec.Command("umount", probe).Run()
		breakers = append(breakers, breaker{"full disk", func(t *testing.T) (string, func(string)) {
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt).CombinedOutput(); err != nil {
				t.Fatalf("mount: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
			return mnt, func(data string) {
				f, err := os.Create(filepath.Join(data, "fill"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				chunk := make([]byte, 4096)
				for {
					if _, err := f.Write(chunk); err != nil {
						if !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
							t.Fatal(err)
						}
						return
					}
				}
			}
		}})
	} else {
		t.Logf("no tmpfs (mount refused: %v): the full-disk case is covered by internal/audit's injected faults", err)
	}
	for _, b := range breakers {
		for _, required := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, required=%v", b.name, required), func(t *testing.T) {
				t.Parallel()
				data, brk := b.setup(t)
				s := startServer(t, map[string]string{"DATA_DIR": data, "AUDIT_REQUIRED": fmt.Sprint(required)})
				mustSucceed(t, s.invoke(t, "write_file", map[string]any{"path": "before.txt", "content": "x"}))
				brk(data)
				// The journal folder is checked once a second: call until
				// the fault shows, or, failing open, until the log says so.
				deadline := time.Now().Add(waitGuard)
				for i := 0; ; i++ {
					if time.Now().After(deadline) {
						t.Fatalf("the audit fault never showed; logs:\n%s", s.logs.String())
					}
					name := fmt.Sprintf("probe-%d.txt", i)
					res := s.invoke(t, "write_file", map[string]any{"path": name, "content": "x"})
					_, statErr := os.Stat(filepath.Join(s.Workspace, name))
					if required {
						if res.Error != nil && res.Error.Code == toolerr.AuditFailed {
							// On the full disk the journal's last page still
							// takes a few start lines while no record fits:
							// these calls ran and say so.
							if statErr != nil || !strings.Contains(res.Result, "the call ran") || !strings.Contains(res.Result, name) {
								t.Fatalf("audit_failed answer: %+v (file: %v)", res, statErr)
							}
							continue
						}
						if res.Status == registry.StatusSuccess {
							time.Sleep(50 * time.Millisecond)
							continue
						}
						mustFail(t, res, toolerr.AuditUnavailable, "the call was not run", "Next:")
						if !os.IsNotExist(statErr) {
							t.Errorf("the refused call wrote %s: %v", name, statErr)
						}
						break
					}
					if res.Status != registry.StatusSuccess || statErr != nil {
						t.Fatalf("failing open, the call did not run: %+v, %v", res, statErr)
					}
					if strings.Contains(s.logs.String(), "audit log cannot record the call's start") {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
	}
}
