package auditcli

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

// verify is "toolsvc audit verify".
func verify(e env, args []string) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	pubFile := fs.String("pubkey", "", "the Ed25519 public key (PEM) every digest must be signed by: openssl pkey -in KEY -pubout")
	asJSON := fs.Bool("json", false, "print the report as one JSON document")
	progress := fs.Bool("progress", false, "report progress on standard error even when it is no terminal")
	maxShown := fs.Int("max", 20, "problems printed at most (the count says how many there are)")
	if done, code := e.parse(fs, args, "verify [-pubkey FILE] [-json] [-progress] [DATA_DIR]"); done {
		return code
	}
	dir, ok := e.auditDir(fs.Args())
	if !ok {
		return ExitUsage
	}
	var pub ed25519.PublicKey
	if *pubFile != "" {
		var err error
		if pub, err = audit.PublicKey(*pubFile); err != nil {
			return e.fail(err)
		}
	}
	opts := audit.VerifyOptions{PublicKey: pub}
	if e.showProgress(*progress) {
		opts.Progress = func(done, total int) {
			fmt.Fprintf(e.stderr, "\rverify: %d of %d records read", done, total)
			if done == total {
				fmt.Fprintln(e.stderr)
			}
		}
	}
	began := time.Now()
	rep, err := audit.Verify(dir, opts)
	if err != nil {
		return e.fail(err)
	}
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", out)
	} else {
		printReport(e, rep, pub, *maxShown, time.Since(began))
	}
	if len(rep.Problems) > 0 {
		return ExitFound
	}
	return ExitOK
}

func printReport(e env, rep *audit.Report, pub ed25519.PublicKey, maxShown int, took time.Duration) {
	w := e.stdout
	keyNote := "signatures checked against the key each digest names (give -pubkey to check them against a key you trust)"
	if pub != nil {
		sum := sha256.Sum256(pub)
		keyNote = "signatures checked against key SHA256:" + hex.EncodeToString(sum[:8])
	}
	fmt.Fprintf(w, "%d records in %d chains, %d digests (%d signed); %s; %s\n", rep.Records, rep.Chains, rep.Digests, rep.Signed, keyNote, took.Round(time.Millisecond))
	if rep.Cut > 0 {
		fmt.Fprintf(w, "%d records deleted by retention, as the digests record\n", rep.Cut)
	}
	if rep.Unsealed > 0 {
		fmt.Fprintf(w, "%d records written after their chain's last digest: tied to the chain, not yet sealed\n", rep.Unsealed)
	}
	if rep.Unchained > 0 {
		fmt.Fprintf(w, "%d records older than the chain (written before it existed): not checked\n", rep.Unchained)
	}
	if len(rep.Problems) == 0 {
		fmt.Fprintln(w, "OK: the log is intact")
		return
	}
	fmt.Fprintf(w, "FAILED: %d problems; the first bad record comes first\n", len(rep.Problems))
	for i, p := range rep.Problems {
		if i == maxShown {
			fmt.Fprintf(w, "... and %d more (-max)\n", len(rep.Problems)-i)
			break
		}
		where := fmt.Sprintf("chain %q", p.Chain)
		if p.Seq > 0 {
			where += fmt.Sprintf(" seq %d", p.Seq)
		}
		if p.File != "" {
			where += " (" + p.File + ")"
		}
		fmt.Fprintf(w, "%s: %s: %s\n", p.Kind, where, p.Detail)
	}
}
