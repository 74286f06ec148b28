package shellguard

import "testing"

// hiddenCase is a script that runs a command through a program's own
// options or language, and the reason it must be refused for ("" when
// any reason will do).
type hiddenCase struct{ script, reason string }

// runHidden checks refused and allowed scripts in denylist mode, and that
// an allowlist matching every command keeps refusing the refused ones and
// allows the allowed ones. denyOnly are allowed in denylist mode only:
// allowlist mode is stricter about computed text and code-loading
// variables.
func runHidden(t *testing.T, refused []hiddenCase, allowed []string, denyOnly ...string) {
	t.Helper()
	deny := mustGuard(t, Options{})
	broad := mustGuard(t, Options{Allow: []string{`.*`}})
	for _, tc := range refused {
		t.Run("refused/"+tc.script, func(t *testing.T) {
			wantBlocked(t, deny, tc.script, tc.reason)
			wantBlocked(t, broad, tc.script, "")
		})
	}
	for _, s := range allowed {
		t.Run("allowed/"+s, func(t *testing.T) {
			wantAllowed(t, deny, s)
			wantAllowed(t, broad, s)
		})
	}
	for _, s := range denyOnly {
		t.Run("allowed-denylist/"+s, func(t *testing.T) { wantAllowed(t, deny, s) })
	}
}

// TestSed: GNU sed runs `e command`, a bare `e` and the e flag of s run the
// pattern space, and w writes files.
func TestSed(t *testing.T) {
	runHidden(t, []hiddenCase{
		{"sed '1e rm -rf x' f", reasonRecursiveRm},
		{"sed -e '1e rm -rf x' f", reasonRecursiveRm},
		{"sed -ne '1e rm -rf x' f", reasonRecursiveRm},
		{"sed -n -e p -e '$e shutdown now' f", "shutting down"},
		{"sed --expression='e rm -rf x' f", reasonRecursiveRm},
		{"sed --expr 'e rm -rf x' f", reasonRecursiveRm},
		{"sed --e p --e '1e rm -rf x' f", reasonRecursiveRm},
		{"sed -i 's/a/b/;e rm -rf x' f", reasonRecursiveRm},
		{"sed '/x/{\ne rm -rf x\n}' f", reasonRecursiveRm},
		{"sed '1!e rm -rf x' f", reasonRecursiveRm},
		{"sed '/a/,/b/ e rm -rf x' f", reasonRecursiveRm},
		{"sed '1e sh -c \"rm -rf x\"' f", reasonRecursiveRm},
		{"gsed '1e rm -rf x' f", reasonRecursiveRm},
		{"sed e f", "pattern space"},
		{"sed '1e' f", "pattern space"},
		{"sed 's/.*/rm -rf x/e' f", "pattern space"},
		{"sed 's/x/y/ge' f", "pattern space"},
		{"sed -n 's|x|y|pe' f", "pattern space"},
		{"sed 's/a/b/;s/c/d/e' f", "pattern space"},
		{`sed "$S" f`, "computed at run time"},
		{`sed "1$E" f`, "computed at run time"},
		{`sed "s/a/b/$F" f`, "computed at run time"},
		{`sed "1e $C" f`, "computed at run time"},
		{"sed 'w /etc/passwd' f", "system path"},
		{"sed 's/x/y/w /dev/sda' f", "raw disk"},
		{"echo x | xargs sed", "from the input"},
		{`find . -exec sed {} \;`, "computed at run time"},
	}, []string{
		"sed -n 1,5p f",
		"sed -i s/a/b/ f",
		"sed -i.bak -e 's/a/b/g' -e '/x/d' f",
		"sed -ie 's/a/b/' f", // -i with the suffix "e"
		"sed -E 's/(e|f)+/X/g' f",
		"sed 's/e/E/' f",
		"sed '/e/d' f",
		"sed -n '/^e/p' f",
		"sed 's/a/b/I' f",
		"sed 'y/abc/efg/' f",
		"sed 'a hello; e is text here' f",
		"sed '1i\\\ne rm -rf is text too' f",
		"sed '# e rm -rf x' f",
		"sed 's/a/b/w out.txt' f",
		"sed -n 'w /dev/stdout' f",
		"sed '1e ls' f",
		"sed -f script.sed f",
		`sed --sandbox "$S" f`,
		"sed --version",
		"find . -name '*.txt' -exec sed -i 's/a/b/' {} +",
	}, `sed "s/$a/$b/g" f`, `sed -n "${n}p" f`)
	// In allowlist mode a computed script is refused: only --sandbox makes
	// it safe to run.
	g := mustGuard(t, Options{Allow: []string{`sed\b`}})
	wantBlocked(t, g, `sed "s/$a/$b/g" f`, "--sandbox")
	wantAllowed(t, g, `sed --sandbox "s/$a/$b/g" f`)
	wantBlocked(t, g, "sed '1e date' f", "not on the allowlist")
}

func TestScanSed(t *testing.T) {
	for _, tc := range []struct {
		script  string
		execs   []string
		writes  []string
		problem bool
	}{
		{script: "p"},
		{script: "1e ls -l; echo x", execs: []string{"ls -l; echo x"}},
		{script: "$ !e date\n2e uptime", execs: []string{"date", "uptime"}},
		{script: "s/a/b/gw out\np", writes: []string{"out"}},
		{script: "w /tmp/x\ne", writes: []string{"/tmp/x"}, problem: true},
		{script: `s/a\/e/b/g`},
		{script: `\,e,d`},
		{script: "b end; :end", execs: nil},
		{script: "s/x/y/3e", problem: true},
		{script: "1" + string(computedMark), problem: true},
		{script: "s/" + string(computedMark) + "/x/g"},
	} {
		r := scanSed(tc.script)
		if (r.problem != "") != tc.problem || !equal(r.execs, tc.execs) || !equal(r.writes, tc.writes) {
			t.Errorf("scanSed(%q) = %+v, want execs %q writes %q problem %v", tc.script, r, tc.execs, tc.writes, tc.problem)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTar: GNU tar runs checkpoint actions, --to-command, compressors and
// volume scripts through the shell.
func TestTar(t *testing.T) {
	runHidden(t, []hiddenCase{
		{"tar --checkpoint=1 --checkpoint-action=exec='rm -rf x' -cf a.tar .", reasonRecursiveRm},
		{"tar --checkpoint=1 --checkpoint-action 'exec=sh -c \"rm -rf x\"' -cf a.tar .", reasonRecursiveRm},
		{"tar --checkpoint-act=exec=shutdown -cf a.tar .", "shutting down"},
		{`tar --checkpoint-action="$A" -cf a.tar .`, "computed at run time"},
		{`tar --checkpoint-action="exec=$C" -cf a.tar .`, "computed at run time"},
		{"tar -xf a.tar --to-command='rm -rf x'", reasonRecursiveRm},
		{"tar -xf a.tar --to-c 'rm -rf x'", reasonRecursiveRm},
		{"tar -I 'rm -rf x' -cf a.tar .", reasonRecursiveRm},
		{"tar -cI'rm -rf x' -f a.tar .", reasonRecursiveRm},
		{"tar --use-compress-program='shred -u' -cf a.tar .", "shred"},
		{`tar --use-compress-program "$C" -cf a.tar .`, "computed at run time"},
		{`tar --to-command="$C" -xf a.tar`, "computed at run time"},
		{"tar cfI a.tar 'shred -u y' .", "shred"},
		{"tar -F reboot -cf a.tar .", "shutting down"},
		{"tar --info-script='rm -rf x' -cf a.tar .", reasonRecursiveRm},
		{"tar --new-volume-script='mkfs.ext4 img' -cf a.tar .", "format"},
		{"tar --rsh-command=/usr/bin/shred -cf host:a.tar .", "shred"},
		{`TAR_OPTIONS='--to-command="rm -rf x"' tar xf a.tar`, "TAR_OPTIONS"},
		{"TAR_OPTIONS='-I shred' tar xf a.tar", "shred"},
		{`TAR_OPTIONS="$O" tar xf a.tar`, "computed at run time"},
	}, []string{
		"tar xzf a.tgz",
		"tar czf out.tgz src/",
		`tar czf out.tgz "$dir"`,
		"tar -xf a.tar -C out",
		"tar -I zstd -xf a.tar.zst",
		"tar --use-compress-program=pigz -cf a.tgz .",
		"tar --checkpoint=100 --checkpoint-action=dot -cf a.tar .",
		"tar -xf a.tar --to-command=cat",
		"tar --totals -cf a.tar .",
		"TAR_OPTIONS=--verbose tar xf a.tar",
	})
}

// TestFindExec: both terminators end the -exec command only where GNU
// find says so, and every command is judged.
func TestFindExec(t *testing.T) {
	runHidden(t, []hiddenCase{
		{`find . -exec rm -rf {} +`, reasonRecursiveRm},
		{`find . -exec rm -rf {} \;`, reasonRecursiveRm},
		{`find . -execdir rm -rf {} +`, reasonRecursiveRm},
		{`find . -okdir rm -rf {} ';'`, reasonRecursiveRm},
		// "+" not right after {} is an argument: find runs `rm + -rf x`.
		{`find . -exec rm + -rf x \;`, reasonRecursiveRm},
		// -ok does not take "+": the command runs on to ";".
		{`find . -ok rm {} + -rf \;`, reasonRecursiveRm},
		{`find . -exec echo {} + -exec rm -rf x \;`, reasonRecursiveRm},
		{`find . -exec echo {} \; -execdir shred {} +`, "shred"},
		{"find . -delete", "recursive deletion"},
		{"find . -name x -delete", "find -delete"},
		{"find . -fprint /etc/passwd", "system path"},
		{"find . -fprintf /dev/sda '%p'", "raw disk"},
	}, []string{
		"find . -name '*.go' -exec grep -l x {} +",
		`find . -name '*.go' -exec grep -l x {} \;`,
		`find . -exec echo + {} \;`,
		"find . -type f -fprint list.txt",
		"find . -fprintf out.txt '%p\\n' -fls ls.txt",
	})
}

// TestEnvVarsThatRunCode: BASH_ENV and ENV make shells source files;
// GIT_SSH_COMMAND and friends hold commands.
func TestEnvVarsThatRunCode(t *testing.T) {
	runHidden(t, []hiddenCase{
		{"BASH_ENV=./x bash -c true", "BASH_ENV"},
		{"env BASH_ENV=./x bash -c true", "BASH_ENV"},
		{"env -i BASH_ENV=./x bash script.sh", "BASH_ENV"},
		{"sudo BASH_ENV=./x bash -c true", "BASH_ENV"},
		{"export BASH_ENV=./x; bash -c true", "BASH_ENV"},
		{"BASH_ENV=./x; export BASH_ENV", "BASH_ENV"},
		{"export BASH_ENV", "BASH_ENV"},
		{"declare -x BASH_ENV=./x", "BASH_ENV"},
		{"sh -c 'BASH_ENV=./x bash -c true'", "BASH_ENV"},
		{"ENV=./x sh -i", "ENV"},
		{"export ENV=~/.shrc", "ENV"},
		{`ENV="$F" dash -ic true`, "ENV"},
		{"ENV=prod sh -ic true", "ENV"},
		{"env ENV=prod dash -ic true", "ENV"},
		{"GIT_SSH_COMMAND='rm -rf x' git fetch", reasonRecursiveRm},
		{`GIT_SSH_COMMAND="$X" git fetch`, "computed at run time"},
		{"GIT_SSH=/usr/bin/shred git fetch", "shred"},
		{"GIT_EDITOR='shutdown now' git commit", "shutting down"},
		{"GIT_PAGER='rm -rf x' git log", reasonRecursiveRm},
		{"export GIT_PAGER='rm -rf x'", reasonRecursiveRm},
		{"env GIT_EXTERNAL_DIFF='rm -rf x' git diff", reasonRecursiveRm},
		{"EDITOR='rm -rf x' crontab -e", reasonRecursiveRm},
		{"LESSOPEN='|rm -rf x %s' less f", reasonRecursiveRm},
		{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='rm -rf x' git log", "core.pager"},
		{`GIT_CONFIG_PARAMETERS="'core.pager'='rm -rf x'" git log`, "GIT_CONFIG_PARAMETERS"},
	}, []string{
		"echo $BASH_ENV",
		"unset BASH_ENV",
	},
		"ENV=prod make",
		"export ENV=production",
		"GIT_PAGER=cat git log",
		"EDITOR=vim git commit",
		`GIT_SSH_COMMAND="ssh -i $KEY -o StrictHostKeyChecking=no" git fetch`,
		"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=user.name GIT_CONFIG_VALUE_0=bot git log",
	)
}

// TestAwk: system(), print | cmd and cmd | getline run commands through
// the shell; a literal command is judged, a computed one refused.
func TestAwk(t *testing.T) {
	runHidden(t, []hiddenCase{
		{`awk 'BEGIN { system("rm -rf x") }'`, reasonRecursiveRm},
		{`awk 'BEGIN { system("r" "m -rf x") }'`, "computed at run time"},
		{`awk '{ system($0) }' f`, "computed at run time"},
		{`awk -v c='rm -rf x' 'BEGIN { system(c) }'`, "computed at run time"},
		{`awk '{ print | "sh" }' f`, "standard input"},
		{`awk '{ print $0 | "rm -rf x" }' f`, reasonRecursiveRm},
		{`awk '{ print $1 | ("sh -c " $2) }' f`, ""},
		{`awk '{ print $1 | ("cat " $2) }' f`, "computed at run time"},
		{`awk '{ printf "%s\n", $1 |& "sh" }' f`, "standard input"},
		{`awk 'BEGIN { "shutdown now" | getline }'`, "shutting down"},
		{`awk 'BEGIN { cmd = "date"; cmd | getline d }'`, "computed at run time"},
		{`awk 'BEGIN { "ls " dir | getline }'`, "computed at run time"},
		{`gawk -e 'BEGIN { system("shutdown now") }'`, "shutting down"},
		{`mawk --source 'END { print | "rm -rf x" }'`, reasonRecursiveRm},
		{`nawk 'BEGIN { system(ENVIRON["C"]) }'`, "computed at run time"},
	}, []string{
		`awk '{print $1}' f`,
		`awk -F: '{ print $1 | "sort -u" }' /etc/passwd`,
		`awk 'BEGIN { "date" | getline d; print d }'`,
		`awk 'BEGIN { while (("ls" | getline l) > 0) print l }'`,
		`awk '$1 ~ /a|b/ { print }' f`,
		`awk '{ if ($1 > 0 || $2 < 1) print $1 "|" $2 }' f`,
		`awk 'BEGIN { FS = "|" } { print $2 }' f`,
		`awk '{ n = $1 / 2; print n | "cat" }' f`,
		`awk '{ print > "out.txt" }' f`,
		`awk 'BEGIN { system("") }'`,
		`awk -f prog.awk f`,
		`awk '# print | cmd in a comment
{ print }' f`,
	})
}

// TestGitRunsCommands: settings, options, subcommands and URLs through
// which git runs a command.
func TestGitRunsCommands(t *testing.T) {
	runHidden(t, []hiddenCase{
		{"git -c core.sshCommand='rm -rf x' fetch", reasonRecursiveRm},
		{"git -c core.pager='rm -rf x' log", reasonRecursiveRm},
		{"git -c core.editor='shutdown now' commit", "shutting down"},
		{"git -c core.fsmonitor='rm -rf x' status", reasonRecursiveRm},
		{"git -c alias.x='!rm -rf x' x", reasonRecursiveRm},
		{"git -c core.hooksPath=./evil commit -m x", "hooksPath"},
		{"git config core.hooksPath ./hooks", "hooksPath"},
		{"git -c include.path=./x.cfg log", "including"},
		{"git -c protocol.ext.allow=always clone 'ext::sh -c touch% x' d", "ext::"},
		{"git -c protocol.allow=always fetch", "ext::"},
		{"git --config-env=core.pager=P log", "environment"},
		{"git --exec-path=./evil status", "exec-path"},
		{"git clone 'ext::sh -c rm% -rf% x' d", reasonRecursiveRm},
		{`git clone "ext::$X" d`, "computed at run time"},
		{"git clone --upload-pack='rm -rf x' ./repo d", reasonRecursiveRm},
		{"git clone -u 'rm -rf x' ./repo d", reasonRecursiveRm},
		{"git fetch --upload-pack='shutdown now' origin", "shutting down"},
		{"git push --receive-pack='rm -rf x' ./r", reasonRecursiveRm},
		{`git ls-remote --upload-pack="$X" ./r`, "computed at run time"},
		{"git archive --remote=./r --exec='rm -rf x' HEAD", reasonRecursiveRm},
		{"git rebase -x 'rm -rf x' main", reasonRecursiveRm},
		{"git rebase --exec='rm -rf x' main", reasonRecursiveRm},
		{"git submodule foreach 'rm -rf x'", reasonRecursiveRm},
		{"git submodule --quiet foreach --recursive rm -rf x", reasonRecursiveRm},
		{"git bisect run rm -rf x", reasonRecursiveRm},
		{"git difftool -x 'rm -rf x'", reasonRecursiveRm},
		{"git filter-branch --tree-filter 'rm -rf x' HEAD", reasonRecursiveRm},
		{"git grep -O'rm -rf x' foo", reasonRecursiveRm},
		{"git config --file x.cfg core.pager 'rm -rf x'", reasonRecursiveRm},
		{"git config set core.sshCommand 'rm -rf x'", reasonRecursiveRm},
	}, []string{
		"git log",
		"git status",
		"git -c core.hooksPath=/dev/null commit -m x",
		"git -c protocol.file.allow=always submodule update",
		"git -c core.pager=cat log",
		"git --exec-path",
		"git commit -m '--exec=rm -rf x'",
		"git push -u origin main",
		"git add -u",
		"git rebase --exec 'go test ./...' main",
		"git submodule foreach git pull",
		"git bisect run go test ./...",
		`git clone "$URL" d`,
	})
}

// TestRenamedCopies: a copy or link the script makes of a program the
// guard has rules for is judged as that program.
func TestRenamedCopies(t *testing.T) {
	runHidden(t, []hiddenCase{
		{"cp /sbin/mkfs.ext4 ./x && ./x disk.img", "copy of mkfs.ext4"},
		{"ln -s /usr/bin/shred s; ./s secret", "copy of shred"},
		{"ln /usr/bin/shred s; ./s secret", "copy of shred"},
		{"install -m 755 /usr/bin/shred ./bin/s && ./bin/s f", "copy of shred"},
		{"cp /bin/rm ./r; ./r -rf x", reasonRecursiveRm},
		{"cp -- /sbin/reboot ./r; ./r", "shutting down"},
		{`cp "$(which shred)" ./t && ./t f`, "copy of shred"},
		{"cp $(command -v rm) ./t && ./t -rf y", reasonRecursiveRm},
		{"cp /bin/bash ./b; ./b -c 'rm -rf x'", reasonRecursiveRm},
		{"cp /usr/bin/env ./e; ./e rm -rf x", reasonRecursiveRm},
		{"cp /usr/bin/shred ./shred; mv ./shred ./s; ./s x", "copy of shred"},
		{"for i in 1 2; do ./s f; cp /usr/bin/shred s; done", "copy of shred"},
		{"cp /usr/bin/shred s; sh -c './s f'", "copy of shred"},
		{`cp /usr/bin/shred s; find . -exec ./s {} \;`, "copy of shred"},
		{"cp /usr/bin/shred s; nice ./s f", "copy of shred"},
	}, []string{
		"cp /bin/ls ./myls && ./myls -la",
		"cp /bin/rm ./r; ./r file.txt",
		"cp -t bin /usr/bin/shred", // keeps its name: bin/shred is refused by name
		"cp a.sh b.sh && ./b.sh",
		"ln -s /usr/bin/python3 py && ./py script.py",
	})
	wantBlocked(t, mustGuard(t, Options{}), "cp -t bin /usr/bin/shred && bin/shred f", "shred")
}
