package customtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tools"
)

// Runner runs a program through exec's run path (*tools.Exec).
type Runner interface {
	Run(ctx context.Context, p tools.Program) (tools.Ran, error)
}

// CommandDeps are what command tools run with.
type CommandDeps struct {
	Exec Runner
	// Sandbox returns exec's sandbox with the network on or off.
	Sandbox func(network bool) (*sandbox.Sandbox, error)
	// AllowSandbox returns exec's sandbox whose commands reach the
	// network only through the service's proxy, for a tool with an
	// allowlist; Egress is that proxy's guard and log.
	AllowSandbox func() (*sandbox.Sandbox, error)
	Egress       egress.Options
	// Workspace is the host path of the workspace: the working folder, and
	// what a relative program path is relative to.
	Workspace string
	// DefaultTimeout is a call's timeout when the tool gives none.
	DefaultTimeout time.Duration
}

// MaxEnvValue is the longest argument value passed as a TOOL_ARG_
// variable; a longer one is left out of the environment (stdin always
// holds every argument): the kernel refuses a single variable above
// 128 KiB, and the whole environment shares a limit with the arguments.
const MaxEnvValue = 32 << 10

// Command is a tool that runs the operator's program in exec's sandbox:
// the arguments arrive as one JSON object on stdin and as TOOL_ARG_<NAME>
// variables, never in a command line or a script.
type Command struct {
	spec   Spec
	deps   CommandDeps
	sb     *sandbox.Sandbox
	egress *egress.Options // the proxy's settings with an allowlist; nil without
}

// NewCommand returns the command tool of s.
func NewCommand(s Spec, d CommandDeps) (*Command, error) {
	c := &Command{spec: s, deps: d}
	var err error
	if len(s.NetAllow) > 0 {
		if d.AllowSandbox == nil {
			return nil, errors.New("network: an allowlist needs exec's sandbox, which is off")
		}
		if c.sb, err = d.AllowSandbox(); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		rules, err := egress.ParseRules(s.NetAllow, nil)
		if err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		o := d.Egress
		o.Rules = rules
		c.egress = &o
	} else if c.sb, err = d.Sandbox(s.Network); err != nil {
		return nil, err
	}
	if c.spec.Timeout <= 0 {
		c.spec.Timeout = d.DefaultTimeout
	}
	return c, nil
}

// Name implements registry.Tool.
func (c *Command) Name() string { return c.spec.Name }

// Annotations implements registry.Annotated: what the entry states.
func (c *Command) Annotations() registry.Annotations { return c.spec.Hints }

// Description implements registry.Tool.
func (c *Command) Description() string { return c.spec.Description }

// Parameters implements registry.Tool.
func (c *Command) Parameters() json.RawMessage { return c.spec.Parameters }

// Timeout implements registry.Timeouter: above the wait for a free slot
// plus the program's own timeout, so that the program's timeout, which
// reports its last output, fires first.
func (c *Command) Timeout() time.Duration { return 2*c.spec.Timeout + 15*time.Second }

// Execute implements registry.Tool.
func (c *Command) Execute(ctx context.Context, args json.RawMessage) (string, error) {
	env, err := argEnv(args)
	if err != nil {
		return "", err
	}
	argv, err := c.argv()
	if err != nil {
		return "", err
	}
	stdin := append(append([]byte(nil), args...), '\n')
	ran, err := c.deps.Exec.Run(ctx, tools.Program{
		Argv: argv, Stdin: stdin, Env: env, Sandbox: c.sb, Egress: c.egress,
		Timeout: c.spec.Timeout, MaxOutput: c.spec.MaxOutput,
	})
	if err != nil {
		return "", err
	}
	if ran.ExitCode != 0 {
		// Without stderr's final newline: the message puts a blank line after it.
		tail := strings.TrimRight(lastBytes(ran.Stderr, 2000), "\n")
		if strings.TrimSpace(tail) == "" {
			tail = "(nothing on stderr)"
		}
		return "", toolerr.Errorf(toolerr.ToolError, "%s failed (exit code %d).\n\nSTDERR (last part):\n%s%s\n\nNext: check the arguments against the tool's description and retry, or tell the user the tool failed.", c.spec.Name, ran.ExitCode, tail, ran.Refused)
	}
	if strings.TrimSpace(ran.Stdout) == "" {
		return "(no output)" + ran.Refused, nil
	}
	return ran.Stdout + ran.Refused, nil
}

// argv is the program to run: the shell with the operator's script, or
// the operator's argv with its program found (a path with a slash is
// relative to the workspace, a bare name is looked up on PATH).
func (c *Command) argv() ([]string, error) {
	if c.spec.Shell != "" {
		return []string{tools.Shell, "-c", c.spec.Shell}, nil
	}
	argv := append([]string(nil), c.spec.Argv...)
	prog := argv[0]
	switch {
	case filepath.IsAbs(prog):
	case strings.ContainsRune(prog, '/') || strings.ContainsRune(prog, filepath.Separator):
		argv[0] = filepath.Join(c.deps.Workspace, prog)
	default:
		p, err := exec.LookPath(prog)
		if err != nil {
			return nil, toolerr.Errorf(toolerr.Unavailable, "%s cannot run: its program %q is not installed here (%v). Next: tell the user the tool is not available on this server.", c.spec.Name, prog, err)
		}
		argv[0] = p
	}
	return argv, nil
}

// argEnv turns the top-level arguments into TOOL_ARG_<NAME> variables: a
// string as it is, any other value as JSON. A string holding NUL cannot be
// a variable, and passing it cut would hand the program a different value
// than the model sent, so the call is refused. A value longer than
// MaxEnvValue is left out (it is on stdin). Two names that map to the same
// variable: the first in sorted order wins (the file's schema cannot
// declare both; see checkArgNames).
func argEnv(args json.RawMessage) ([]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, toolerr.Errorf(toolerr.InvalidArguments, "the arguments must be a JSON object: %v. Next: send the arguments as one JSON object.", err)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	var env []string
	for _, k := range names {
		v := EnvName(k)
		if seen[v] {
			continue
		}
		seen[v] = true
		raw := m[k]
		var val string
		if len(raw) > 0 && raw[0] == '"' {
			_ = json.Unmarshal(raw, &val) // valid: it passed the schema
		} else {
			var b bytes.Buffer
			if json.Compact(&b, raw) == nil {
				raw = b.Bytes()
			}
			val = string(raw)
		}
		if strings.ContainsRune(val, 0) {
			return nil, toolerr.Errorf(toolerr.InvalidArguments, "argument %q holds a NUL character (\\u0000), which a program cannot receive in an environment variable. Next: send the value without NUL characters.", k)
		}
		if len(val) > MaxEnvValue {
			continue
		}
		env = append(env, v+"="+val)
	}
	return env, nil
}

// lastBytes keeps the end of s, at most n bytes, from a line start when
// one is near.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 200 {
		s = s[i+1:]
	}
	return "...\n" + strings.ToValidUTF8(s, "\uFFFD")
}

// String describes the runner for the start-up log.
func (c *Command) String() string {
	net := "off"
	switch {
	case c.spec.Network:
		net = "on"
	case len(c.spec.NetAllow) > 0:
		net = "only " + strings.Join(c.spec.NetAllow, ", ")
	}
	prog := "shell script"
	if c.spec.Shell == "" {
		prog = fmt.Sprintf("program %s", c.spec.Argv[0])
	}
	return fmt.Sprintf("command: %s, sandbox %s, network %s, timeout %s", prog, c.sb.Mode(), net, c.spec.Timeout)
}

var (
	_ registry.Tool      = (*Command)(nil)
	_ registry.Timeouter = (*Command)(nil)
)
