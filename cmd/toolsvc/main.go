// Command toolsvc serves CountBot's agent tools over HTTP/JSON.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/config"
	toolhttp "github.com/countbot/toolsvc/internal/http"
	"github.com/countbot/toolsvc/internal/ready"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/skills"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/workspace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "toolsvc:", err)
		os.Exit(1)
	}
}

// run starts the service and blocks until ctx is done, then shuts it down.
// The configuration comes from the TOOLSVC_* environment variables.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("toolsvc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // written below: to stdout when asked for, else to stderr
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_ = config.Usage(stdout)
		} else {
			_ = config.Usage(stderr)
		}
		return err
	}
	if fs.NArg() > 0 {
		_ = config.Usage(stderr)
		return fmt.Errorf("unexpected argument %q: toolsvc is configured through the environment", fs.Arg(0))
	}
	ver := version()
	if *showVersion {
		_, err := fmt.Fprintln(stdout, "toolsvc", ver)
		return err
	}

	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if err := protectProcess(); err != nil {
		return fmt.Errorf("protecting the service's process: %w", err)
	}
	level, _ := zerolog.ParseLevel(cfg.LogLevel)
	// Every secret the service holds is cut from log lines, results,
	// progress events and audit records.
	red := redact.New(cfg.SecretValues()...)
	log := zerolog.New(red.Writer(stdout)).Level(level).With().Timestamp().Logger()

	ws, err := workspace.Open(cfg.Workspace, cfg.RestrictWorkspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("TOOLSVC_DATA_DIR: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("TOOLSVC_DATA_DIR: %w", err)
	}

	// Stopping is canceled when shutdown starts: running calls end then.
	stopping, stopTools := context.WithCancel(context.Background())
	defer stopTools()

	regOpts := registry.Options{Log: log, DefaultTimeout: cfg.CallTimeout, Redact: red.String, RedactProgress: red.Progress}
	if cfg.AuditEnabled {
		al, err := audit.New(audit.Options{
			Dir:            filepath.Join(dataDir, "audit_logs"),
			MaxResultChars: cfg.AuditMaxResultChars,
			RetentionDays:  cfg.AuditRetentionDays,
			Log:            log,
		})
		if err != nil {
			return err
		}
		defer al.Close()
		regOpts.Audit = al
		regOpts.AuditFailOpen = !cfg.AuditRequired
		go al.RunRetention(stopping, time.Hour)
	}
	reg := registry.New(regOpts)
	sk := skills.New(ws.Root(), cfg.SkillsDisabled) // read_file's gate and GET /skills
	// Tools left out because what they need is missing here: /readyz
	// says which and why, beside its checks.
	off := map[string]string{}
	// Sub-agents (spawn, /agents): only with a model endpoint configured.
	agents, closeAgents, err := newAgents(stopping, cfg, reg, dataDir, log, red.String)
	if err != nil {
		return err
	}
	conv, err := newConversations(cfg, agents, reg, dataDir, log, red.String) // send_message
	if err != nil {
		return err
	}
	cleanup, err := tools.Register(reg, tools.Deps{Config: cfg, Workspace: ws, DataDir: dataDir, Log: log, Skills: sk,
		Unavailable: func(tool, reason string) { off[tool] = "off: " + reason }, Agents: agents, Conversations: conv})
	if err != nil {
		return err
	}
	defer cleanup()
	defer closeAgents() // before the tools they use are released

	handler := toolhttp.NewHandler(toolhttp.Options{
		Registry:      reg,
		APIKeys:       cfg.APIKeys,
		MaxBodyBytes:  cfg.MaxBodyBytes,
		MaxConcurrent: cfg.MaxConcurrentCalls,
		Log:           log,
		Stopping:      stopping,
		Ready: func() (bool, map[string]string) {
			ok, checks := readiness(ws, dataDir, cfg.MinFreeBytes)
			for tool, why := range off {
				checks["tool:"+tool] = why
			}
			return ok, checks
		},
		Routes:  toolhttp.JoinRoutes(toolhttp.SkillsRoutes(sk, log), toolhttp.AgentsRoutes(agents)),
		Version: ver,

		BodyTimeout:        cfg.BodyTimeout,
		StreamWriteTimeout: cfg.StreamWriteTimeout,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      time.Minute, // tool calls lift it for their own deadline
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("TOOLSVC_ADDR: %w", err)
	}
	// Package initialisation (go-trafilatura's date parser compiles its
	// locale tables) leaves garbage behind; return it to the OS before idling.
	debug.FreeOSMemory()
	log.Info().Str("version", ver).Str("addr", ln.Addr().String()).Str("workspace", ws.Dir()).
		Bool("restricted", ws.Restricted()).Bool("audit", cfg.AuditEnabled).Bool("audit_required", cfg.AuditRequired).
		Bool("auth", len(cfg.APIKeys) > 0).Strs("tools", reg.Names()).Msg("listening")

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: refusing new calls, canceling running ones")
	stopTools()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error().Err(err).Msg("shutdown did not finish in time; closing connections")
		_ = srv.Close()
	}
	log.Info().Msg("stopped")
	return nil
}

// readiness checks that the workspace and the data folder exist and are
// writable, and that their file systems have minFree bytes free.
func readiness(ws *workspace.Workspace, dataDir string, minFree int64) (bool, map[string]string) {
	checks := []ready.Check{
		{Name: "workspace", Run: ws.Probe},
		{Name: "data_dir", Run: func() error { return ready.Writable(dataDir) }},
	}
	if minFree > 0 {
		checks = append(checks, ready.Check{Name: "free_space", Run: func() error {
			return ready.FreeSpace(minFree, map[string]string{"workspace": ws.Dir(), "data_dir": dataDir})
		}})
	}
	r := ready.Run(checks...)
	return r.Ready, r.Checks
}

// version is the build's version: the main module's version when it was
// built by "go install module@version", else the version control revision
// it was built from (with "+dirty" when the tree had changes), else
// "devel".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(bi, ok)
}

func versionOf(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev + dirty
}
