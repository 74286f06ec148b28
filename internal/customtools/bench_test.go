package customtools

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/shellguard"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/workspace"
)

// BenchmarkCommandToolVsExec compares, in one run and under each sandbox
// the machine offers, a whole call through the registry of exec running
// `true` with command tools running the same program: as the operator's
// shell script (sh -c true, what exec runs) and as an argv program
// (/bin/true, no shell). Both take exec's run path; the command tool adds
// its arguments as variables and on stdin, and skips exec's guard. The
// op is one call of each; ns/exec, ns/shell and ns/argv are their means,
// shell/exec and argv/exec their ratios.
//
//	go test -run '^$' -bench CommandToolVsExec -benchtime 200x ./internal/customtools/
func BenchmarkCommandToolVsExec(b *testing.B) {
	for _, mode := range []sandbox.Mode{sandbox.None, sandbox.Landlock, sandbox.Bwrap} {
		dir := b.TempDir()
		ws, err := workspace.Open(filepath.Join(dir, "ws"), true)
		if err != nil {
			b.Fatal(err)
		}
		sb, err := sandbox.New(sandbox.Options{Mode: mode, Workspace: ws.Dir(), Private: []string{filepath.Join(dir, "data")}})
		if err != nil {
			ws.Close()
			b.Logf("sandbox %s unavailable: %v", mode, err)
			continue
		}
		guard, err := shellguard.New(shellguard.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ex := tools.NewExec(ws, tools.ExecOptions{Guard: guard, Sandbox: sb})
		reg := registry.New(registry.Options{Log: zerolog.Nop()})
		if err := reg.Register(ex); err != nil {
			b.Fatal(err)
		}
		f, err := Parse("bench.yaml", []byte(`
tools:
  - {name: true_shell, description: d, shell: "true", parameters: {type: object, properties: {x: {type: string}}}}
  - {name: true_argv, description: d, command: ["/bin/true"], parameters: {type: object, properties: {x: {type: string}}}}
`), Options{})
		if err != nil {
			b.Fatal(err)
		}
		built, err := Build(f, Deps{Command: &CommandDeps{
			Exec: ex, Workspace: ws.Dir(), DefaultTimeout: 30 * time.Second,
			Sandbox: func(bool) (*sandbox.Sandbox, error) { return sb, nil },
		}}, func(string) (string, bool) { return "", false })
		if err != nil {
			b.Fatal(err)
		}
		if err := reg.ReplaceSet("bench", built.Tools); err != nil {
			b.Fatal(err)
		}
		// The three calls alternate within one loop, so that the noise of
		// a shared machine falls on all of them alike; each one's mean and
		// its ratio to exec's are reported.
		calls := []struct{ name, tool, args string }{
			{"exec", "exec", `{"command":"true"}`},
			{"shell", "true_shell", `{"x":"an argument"}`},
			{"argv", "true_argv", `{"x":"an argument"}`},
		}
		b.Run("sandbox "+string(mode), func(b *testing.B) {
			spent := make([]time.Duration, len(calls))
			for b.Loop() {
				for i, c := range calls {
					start := time.Now()
					if res := reg.Invoke(context.Background(), c.tool, []byte(c.args), registry.Meta{}); res.Status != registry.StatusSuccess {
						b.Fatal(res.Result)
					}
					spent[i] += time.Since(start)
				}
			}
			for i, c := range calls {
				b.ReportMetric(float64(spent[i].Nanoseconds())/float64(b.N), "ns/"+c.name)
				if i > 0 {
					b.ReportMetric(float64(spent[i])/float64(spent[0]), c.name+"/exec")
				}
			}
		})
		ex.Close()
		sb.Close()
		ws.Close()
	}
}
