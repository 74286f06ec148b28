// Package auditcli is "toolsvc audit": it reads a data folder's audit log
// offline, without the service: verify checks its chain, digests and
// signatures; tail, show and grep print records for people (a table) or
// programs (JSON lines).
package auditcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/countbot/toolsvc/internal/config"
)

// Exit codes, for scripts.
const (
	// ExitOK: verify found the log intact; show, grep found a record.
	ExitOK = 0
	// ExitFound: verify found the log tampered with (its report names
	// the first bad record); show, grep found no record.
	ExitFound = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitError: the folder, a record or the key could not be read.
	ExitError = 3
)

const usage = `usage: toolsvc audit COMMAND [flags] [DATA_DIR]

Reads DATA_DIR/audit_logs offline (DATA_DIR: the argument, else
TOOLSVC_DATA_DIR, else %s).

  verify [-pubkey FILE] [-json] [-progress] [DATA_DIR]
        check every record's place in its replica's chain, the digests that
        seal the chains and their Ed25519 signatures; name the first bad
        record and what is wrong: edited, missing, inserted, reordered,
        truncated, bad signature
  tail [-f] [-n 10] [-json] [DATA_DIR]
        the last records by start time; -f: then each new one as it appears
  show [-json] CALL_ID [DATA_DIR]
        one call's record
  grep [-tool T] [-key K] [-status S] [-since T] [-until T] [-json] [-progress] [DATA_DIR]
        the records that match every filter given; times are RFC 3339,
        a date (2006-01-02), or a duration back from now (90m, 24h)

Exit status: 0 the log is intact (verify) or records were found; 1 verify
found the log tampered with, or nothing matched; 2 a wrong command line;
3 the folder, a record or the key could not be read. Progress goes to
standard error, on a terminal or with -progress.
`

// env is what the commands need from their surroundings.
type env struct {
	ctx            context.Context
	getenv         func(string) string
	stdout, stderr io.Writer
}

// Run runs "toolsvc audit args..." and returns the exit status.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := env{ctx: ctx, getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprintf(stderr, usage, defaultDataDir())
		return ExitUsage
	}
	cmds := map[string]func(env, []string) int{"verify": verify, "tail": tail, "show": show, "grep": grep}
	cmd, ok := cmds[args[0]]
	switch {
	case ok:
		return cmd(e, args[1:])
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		fmt.Fprintf(stdout, usage, defaultDataDir())
		return ExitOK
	}
	fmt.Fprintf(stderr, "toolsvc audit: unknown command %q\n\n"+usage, args[0], defaultDataDir())
	return ExitUsage
}

// parse parses a command's flags; done is set with the exit status when
// the command should stop (help asked for, or wrong flags).
func (e env) parse(fs *flag.FlagSet, args []string, synopsis string) (done bool, code int) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		w, code := e.stderr, ExitUsage
		if errors.Is(err, flag.ErrHelp) {
			w, code = e.stdout, ExitOK
		} else {
			fmt.Fprintf(w, "toolsvc audit: %v\n", err)
		}
		fmt.Fprintf(w, "usage: toolsvc audit %s\n", synopsis)
		fs.SetOutput(w)
		fs.PrintDefaults()
		return true, code
	}
	return false, 0
}

// auditDir is the audit folder of the data folder named by args (at most
// one), else TOOLSVC_DATA_DIR, else the configuration's default.
func (e env) auditDir(args []string) (string, bool) {
	if len(args) > 1 {
		fmt.Fprintf(e.stderr, "toolsvc audit: one data folder at most, got %q\n", args)
		return "", false
	}
	dir := e.getenv(config.Prefix + "_DATA_DIR")
	if len(args) == 1 {
		dir = args[0]
	}
	if dir == "" {
		dir = defaultDataDir()
	}
	return filepath.Join(dir, "audit_logs"), true
}

func defaultDataDir() string {
	for _, sec := range config.Sections() {
		for _, s := range sec.Settings {
			if s.Name == config.Prefix+"_DATA_DIR" {
				return s.Default
			}
		}
	}
	return "./data"
}

// fail reports an error reading the log.
func (e env) fail(err error) int {
	fmt.Fprintf(e.stderr, "toolsvc audit: %v\n", err)
	return ExitError
}

// showProgress says whether progress goes to stderr: asked for, or a
// terminal.
func (e env) showProgress(asked bool) bool {
	if asked {
		return true
	}
	f, ok := e.stderr.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
