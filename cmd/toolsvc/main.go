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
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/countbot/toolsvc/internal/app"
	"github.com/countbot/toolsvc/internal/auditcli"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/gctune"
	"github.com/countbot/toolsvc/internal/initproc"
	"github.com/countbot/toolsvc/internal/netinit"
)

func main() {
	// Started as the first program of a command with a network allowlist
	// (a service without CAP_SYS_ADMIN), this binary makes the command's
	// network namespace ready and executes it; before initproc, as that
	// program may be the first process of its PID namespace.
	if ran, status := netinit.Run(os.Stderr); ran {
		os.Exit(status)
	}
	// As the first process of a PID namespace (a container without an
	// init) the service runs as a child of itself, which reaps orphans.
	if ran, status := initproc.Run(os.Stderr); ran {
		os.Exit(status)
	}
	// Request and call IDs (random UUIDs, two per call) take their bytes
	// from a buffer filled 256 bytes at a time from crypto/rand, instead
	// of a read of 16 per ID. Set here, before anything makes an ID: the
	// switch is not safe to flip while IDs are made.
	uuid.EnableRandPool()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runWith(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr, reloadSignal()); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		// "toolsvc audit" has exit statuses of its own, for scripts, and
		// has said what went wrong.
		var st exitStatus
		if errors.As(err, &st) {
			os.Exit(int(st))
		}
		fmt.Fprintln(os.Stderr, "toolsvc:", err)
		os.Exit(1)
	}
}

// exitStatus is a subcommand's exit status other than 0, which it has
// explained on stderr already.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// reloadSignal delivers SIGHUP: each one asks for the tools file to be
// read again. Signals that come while a reload is pending are merged.
func reloadSignal() <-chan struct{} {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	return reload
}

// run parses the flags, loads the configuration from the TOOLSVC_*
// variables of environ (NAME=value entries, as os.Environ returns them)
// and serves until ctx is done. Its settings come from environ alone (the
// service's parts still find PATH, DISPLAY or GOGC in the process's), so
// the end-to-end tests run it several times at once in one process, each
// with settings of its own.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	return runWith(ctx, args, environ, stdout, stderr, nil)
}

// runWith is run where a value on reload reads the tools file again
// (SIGHUP in main; the tests send their own).
func runWith(ctx context.Context, args, environ []string, stdout, stderr io.Writer, reload <-chan struct{}) error {
	getenv := lookupIn(environ)
	if len(args) > 0 && args[0] == "health" {
		return health(ctx, args[1:], func(name string) string { v, _ := getenv(name); return v }, stdout, stderr)
	}
	// "toolsvc audit" reads a data folder offline: no service settings
	// are parsed, so it works where the service's would not load.
	if len(args) > 0 && args[0] == "audit" {
		if code := auditcli.Run(ctx, args[1:], func(name string) string { v, _ := getenv(name); return v }, stdout, stderr); code != auditcli.ExitOK {
			return exitStatus(code)
		}
		return nil
	}
	// "toolsvc version" prints what -version prints, before any setting
	// is read, so that it answers wherever the binary runs.
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			return fmt.Errorf("unexpected argument %q: toolsvc version takes none", args[1])
		}
		_, err := fmt.Fprintln(stdout, "toolsvc", version())
		return err
	}
	if len(args) > 0 && args[0] == "drain" {
		return drain(ctx, args[1:], func(name string) string { v, _ := getenv(name); return v }, stdout, stderr)
	}
	// "toolsvc help [GROUP|all]" prints settings, before any is read.
	if len(args) > 0 && args[0] == "help" {
		return help(args[1:], stdout, stderr)
	}
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

	// A TOOLSVC_* variable that is no setting (a typo) stops start-up.
	if err := config.CheckNames(environ); err != nil {
		return err
	}
	cfg, err := config.LoadFrom(getenv)
	if err != nil {
		return err
	}
	if err := protectProcess(); err != nil {
		return fmt.Errorf("protecting the service's process: %w", err)
	}
	// The live heap is a few MiB and every call allocates a little: pace
	// the collector by a fixed headroom rather than by the heap's size,
	// unless the operator set GOGC. The pace is process-wide: the
	// end-to-end tests, which run several services in one process, start
	// a tuner each, and they all pace by the same heap.
	gctune.Start(ctx, gctune.Options{})
	// In a container with a memory limit, the collector works harder near
	// it rather than the kernel killing the service (unless GOMEMLIMIT is
	// set).
	gctune.LimitMemory()
	return serveWith(ctx, cfg, ver, stdout, reload)
}

// help answers toolsvc help [GROUP|all]: with no argument what -h prints,
// else one group of settings in full, or all of them. A group that does
// not exist, or a second argument, is a mistake in the command line: exit
// status 2, as for the flag package's, with the groups and the nearest
// one on stderr.
func help(args []string, stdout, stderr io.Writer) error {
	if len(args) > 1 {
		fmt.Fprintf(stderr, "toolsvc help: unexpected argument %q: it takes one group, or all\n", args[1])
		return exitStatus(2)
	}
	topic := ""
	if len(args) == 1 && !slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		topic = args[0]
	}
	err := config.Help(stdout, topic)
	if _, ok := errors.AsType[*config.UnknownGroupError](err); ok {
		fmt.Fprintln(stderr, "toolsvc help:", err)
		return exitStatus(2)
	}
	return err
}

// lookupIn answers as os.LookupEnv does, from environ; where a name is
// there twice, the first entry counts, as for os.LookupEnv.
func lookupIn(environ []string) func(name string) (string, bool) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, seen := vars[k]; !seen {
				vars[k] = v
			}
		}
	}
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// serveWith builds the service from cfg, listens on cfg.Addr and serves
// until ctx is done, then shuts it down. The log goes to stdout. A value on
// reload reads the tools file again.
func serveWith(ctx context.Context, cfg config.Config, ver string, stdout io.Writer, reload <-chan struct{}) error {
	a, err := app.New(cfg, app.Options{Out: stdout, Version: ver})
	if err != nil {
		return err
	}
	defer a.Close()
	log := a.Log()
	// scripts/barehttp -timeouts sets the same, for the benchmarks.
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      time.Minute, // tool calls lift it for their own deadline
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return config.ListenError(cfg.Addr, err)
	}
	// Package initialisation and start-up leave garbage behind; return it
	// to the OS before idling.
	debug.FreeOSMemory()
	log.Info().Str("version", ver).Str("addr", ln.Addr().String()).Func(a.Describe).Msg("listening")
	a.FlushLog()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

wait:
	for {
		select {
		case err := <-serveErr:
			return err
		case <-reload:
			// The outcome, good or bad, is logged; a bad file keeps the
			// tools of the last good load.
			_ = a.Reload()
		case <-ctx.Done():
			break wait
		}
	}
	log.Info().Msg("shutting down: refusing new calls, canceling running ones")
	a.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error().Err(err).Msg("shutdown did not finish in time; closing connections")
		_ = srv.Close()
	}
	log.Info().Msg("stopped")
	return nil
}

// buildVersion is set by the linker: go build -ldflags "-X
// main.buildVersion=v1.2.3". It is the one package-level variable here
// because -X can set nothing else. The image's build (deploy/Dockerfile),
// scripts/compose-up.sh and scripts/container-test.sh set it to git
// describe --tags --always --dirty of the checkout, since those builds see
// no version control information.
var buildVersion string

// version is the build's version, the one toolsvc version, -version, GET
// /, /docs, /healthz and the start-up log report. See versionOf.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(buildVersion, bi, ok)
}

// versionOf picks the version from what the build recorded, first found
// wins:
//
//  1. linked, the value given to the linker (images and release builds,
//     which pass git describe --tags --always --dirty: v0.1.0,
//     v0.1.0-3-g38db168, 38db168-dirty).
//  2. The main module's version in the build information, unless it is
//     "(devel)": the version of a "go install module@version" build, or
//     the one the go command (1.24 and later) derives from the checkout
//     it builds in: the tag on HEAD (v0.1.0), else a pseudo-version of
//     the last tag, the commit's time and 12 digits of its hash
//     (v0.0.0-20261207080713-38db16831491, v0.1.1-0.20261207...), with
//     "+dirty" when the tree had changes. It carries git describe's
//     facts in the form Go modules use.
//  3. The commit the go command recorded (vcs.revision), cut to 12 hex
//     digits, with "+dirty" when vcs.modified is true: builds that
//     stamp the revision but no module version (a go.work workspace).
//  4. "devel": nothing was recorded (-buildvcs=false, or no .git at
//     build time) and nothing was linked.
func versionOf(linked string, bi *debug.BuildInfo, ok bool) string {
	if linked != "" {
		return linked
	}
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
	// Twelve digits, as in Go's pseudo-versions: short enough to read,
	// long enough to name one commit of any repository of this size.
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev + dirty
}
