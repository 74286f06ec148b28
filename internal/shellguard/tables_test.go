package shellguard

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ruleCase is one command given to a rule table, and the reason it is
// refused for ("" when it must pass).
type ruleCase struct{ cmd, reason string }

// TestProgramRules gives every deny rule its own table, calling rules()
// directly on literal words.
func TestProgramRules(t *testing.T) {
	tables := map[string][]ruleCase{
		"rm":        {{"rm -rf x", reasonRecursiveRm}, {"rm --force x", reasonRecursiveRm}, {"rm /etc/x", "system path"}, {"rm --no-preserve-root x", "no-preserve-root"}, {"rm x.txt", ""}, {"rm -- -rf", ""}},
		"shred":     {{"shred -u x", "secure deletion"}},
		"wipe":      {{"wipe x", "secure deletion"}},
		"srm":       {{"srm x", "secure deletion"}},
		"dd":        {{"dd if=/dev/zero of=x", "dd if="}, {"dd of=/dev/sda", "raw disk"}, {"dd of=/etc/x", "system path"}, {"dd of=out.img bs=1M", ""}},
		"init":      {{"init 0", "run level"}, {"init", ""}},
		"telinit":   {{"telinit 1", "run level"}},
		"systemctl": {{"systemctl poweroff", "shutting down"}, {"systemctl --force reboot", "shutting down"}, {"systemctl status nginx", ""}},
		"loginctl":  {{"loginctl suspend", "shutting down"}, {"loginctl list-sessions", ""}},
		"kill":      {{"kill -9 -1", "every process"}, {"kill -s KILL -1", "every process"}, {"kill 1", "every process"}, {"kill -l", ""}, {"kill 12345", ""}},
		"killall5":  {{"killall5 -9", "every process"}},
		"chmod":     {{"chmod -R 777 /", "system path /"}, {"chmod --no-preserve-root 777 x", "no-preserve-root"}, {"chmod +x run.sh", ""}},
		"chown":     {{"chown root /etc/shadow", "system path"}, {"chown bot file", ""}},
		"chgrp":     {{"chgrp -R users /usr", "system path"}, {"chgrp users file", ""}},
		"mv":        {{"mv /etc /tmp/etc", "system path"}, {"mv a b", ""}},
		"cp":        {{"cp x /etc/passwd", "system path"}, {"cp -t /usr/bin x", "system path"}, {"cp --target-directory=/bin x", "system path"}, {"cp -t out /etc/hosts", ""}, {"cp a b", ""}},
		"install":   {{"install -m 755 x /usr/bin/x", "system path"}, {"install -m 755 x bin/x", ""}},
		"ln":        {{"ln -sf x /bin/sh", "system path"}, {"ln -s ../x y", ""}},
		"tee":       {{"tee /dev/sda", "raw disk"}, {"tee -a /etc/hosts", "system path"}, {"tee out.txt", ""}},
		"truncate":  {{"truncate -s 0 /etc/passwd", "system path"}, {"truncate -s 0 log.txt", ""}},
		"hash":      {{"hash -p /bin/rm ls", "hash -p"}, {"hash -r", ""}, {"hash node", ""}, {"hash -t node npx", ""}},
		"enable":    {{"enable -f ./x.so x", "enable -f"}, {"enable -n echo", ""}},
		"unlink":    {{"unlink /etc/passwd", "system path"}, {"unlink x", ""}},
		"rmdir":     {{"rmdir /usr/lib", "system path"}, {"rmdir /s x", "rmdir /s"}, {"rmdir empty", ""}},
	}
	windows := map[string][]ruleCase{
		"format":     {{"FORMAT C: /q", "format"}},
		"format.com": {{"format.com c:", "format"}},
		"format.exe": {{"Format.exe c:", "format"}},
		"del":        {{"del /f x", "del /f"}, {"DEL /S x", "del"}, {"del x.txt", ""}},
		"erase":      {{"erase /q x", "del"}, {"erase x", ""}},
		"del.exe":    {{"del.exe /F x", "del"}},
		"rmdir":      {{"RMDIR /S x", "rmdir /s"}, {"RMDIR x", ""}},
		"rd":         {{"rd /s /q x", "rmdir /s"}, {"rd x", ""}},
	}
	classes := []ruleCase{
		{"mkfs.ext4 img", "formatting"}, {"mke2fs img", "formatting"}, {"fdisk -l", "partitioning"},
		{"shutdown -h now", "shutting down"}, {"reboot", "shutting down"}, {"kexec -e", "shutting down"},
		{"ls -la", ""}, {"SHUTDOWN now", ""},
	}
	run := func(t *testing.T, cases []ruleCase) {
		t.Helper()
		for _, tc := range cases {
			var ws []word
			for _, f := range strings.Fields(tc.cmd) {
				ws = append(ws, litWord(f))
			}
			got := rules(ws[0].text, ws, callCtx{})
			if tc.reason == "" && got != "" || tc.reason != "" && !strings.Contains(got, tc.reason) {
				t.Errorf("rules(%q) = %q, want %q", tc.cmd, got, tc.reason)
			}
		}
	}
	for name := range programRules {
		t.Run(name, func(t *testing.T) {
			if len(tables[name]) == 0 {
				t.Fatalf("programRules[%q] has no table test", name)
			}
			run(t, tables[name])
		})
	}
	for name := range windowsRules {
		t.Run("windows/"+name, func(t *testing.T) {
			if len(windows[name]) == 0 {
				t.Fatalf("windowsRules[%q] has no table test", name)
			}
			run(t, windows[name])
		})
	}
	t.Run("classes", func(t *testing.T) { run(t, classes) })
	for name := range tables {
		if _, ok := programRules[name]; !ok {
			t.Errorf("table for %q, which has no rule", name)
		}
	}
}

// TestLaunchRules gives every launch rule its own table: scripts that
// must be refused for what the program starts, and scripts that pass.
func TestLaunchRules(t *testing.T) {
	tables := map[string]struct{ refused, allowed []string }{
		"eval":           {[]string{`eval "rm -rf x"`, `eval "$P"`}, []string{"eval", "eval echo hi"}},
		"source":         {[]string{"source /dev/stdin", `source "$F"`}, []string{"source ./env.sh", "source"}},
		".":              {[]string{". /dev/fd/0", ". -- -"}, []string{". ./env.sh"}},
		"alias":          {[]string{"alias x='rm -rf x'", `alias "$A"`}, []string{"alias ll='ls -l'", "alias"}},
		"trap":           {[]string{"trap 'rm -rf x' EXIT", `trap "$T" EXIT`}, []string{"trap 'echo bye' EXIT", "trap -l", "trap - EXIT"}},
		"mapfile":        {[]string{"mapfile -C 'rm -rf x' -c 1 a < f"}, []string{"mapfile -t lines < f"}},
		"readarray":      {[]string{"readarray -C 'shutdown now' a < f"}, []string{"readarray -t a < f"}},
		"find":           {[]string{"find . -exec rm -rf {} +", "find . -delete"}, []string{"find . -name '*.go' -exec grep -l x {} +"}},
		"git":            {[]string{"git -c core.pager='rm -rf x' log"}, []string{"git log"}},
		"sed":            {[]string{"sed '1e rm -rf x' f"}, []string{"sed -n 1,5p f"}},
		"gsed":           {[]string{"gsed 's/x/y/e' f"}, []string{"gsed -i s/a/b/ f"}},
		"tar":            {[]string{"tar -I 'rm -rf x' -cf a.tar ."}, []string{"tar xzf a.tgz"}},
		"gtar":           {[]string{"gtar --to-command='rm -rf x' -xf a.tar"}, []string{"gtar czf a.tgz src"}},
		"xargs":          {[]string{"xargs rm -rf", "xargs rm", "xargs sh -c"}, []string{"xargs", "xargs rm --", "xargs -I{} grep x {}"}},
		"parallel":       {[]string{"parallel rm -rf ::: a b", "parallel", "parallel 'echo {}; rm -rf x' ::: a"}, []string{"parallel gzip ::: a b"}},
		"watch":          {[]string{"watch rm -rf x", "watch -x rm -rf x", "watch -n 1 'ls; rm -rf x'"}, []string{"watch -n 5 ls", "watch"}},
		"flock":          {[]string{"flock /tmp/l rm -rf x", "flock -w 5 /tmp/l -c 'rm -rf x'", "flock /tmp/l -c"}, []string{"flock /tmp/l make", "flock /tmp/l"}},
		"busybox":        {[]string{"busybox rm -rf x", "busybox sh -c 'rm -rf x'"}, []string{"busybox --list", "busybox ls"}},
		"su":             {[]string{"su -c 'rm -rf x'", "su root -c 'rm -rf x'", "su", "su - root"}, []string{"su -c 'ls' bot"}},
		"runuser":        {[]string{"runuser -u bob -- rm -rf x", "runuser -l bob"}, []string{"runuser -u bob -- ls"}},
		"ssh":            {[]string{"ssh localhost 'rm -rf ~'", "ssh -p 22 host rm -rf /srv"}, []string{"ssh host uptime", "ssh -V"}},
		"pwsh":           {[]string{"pwsh -Command 'Remove-Item -Recurse -Force /'", "pwsh -c", "pwsh -EncodedCommand SQBFAFgA"}, []string{"pwsh -c 'Get-Date'", "pwsh -Version"}},
		"powershell":     {[]string{`powershell -c "Restart-Computer"`}, []string{"powershell -c Get-ChildItem"}},
		"pwsh.exe":       {[]string{"pwsh.exe -ec SQBFAFgA"}, []string{"pwsh.exe -NoProfile -c Get-Date"}},
		"powershell.exe": {[]string{"powershell.exe /c 'Stop-Computer'"}, []string{"powershell.exe -c Get-Date"}},
		"script":         {[]string{"script -qc 'rm -rf x' /dev/null", "script out.log"}, []string{"script -qc 'make test' /dev/null"}},
	}
	g := mustGuard(t, Options{})
	for _, name := range slices.Sorted(maps.Keys(launchRules())) {
		t.Run(name, func(t *testing.T) {
			tab, ok := tables[name]
			if !ok || len(tab.refused) == 0 || len(tab.allowed) == 0 {
				t.Fatalf("launch rule %q has no table test with refused and allowed cases", name)
			}
			for _, s := range tab.refused {
				wantBlocked(t, g, s, "")
			}
			for _, s := range tab.allowed {
				wantAllowed(t, g, s)
			}
		})
	}
	for name := range tables {
		if _, ok := launchRules()[name]; !ok {
			t.Errorf("table for %q, which has no launch rule", name)
		}
	}
}

// TestZeroGuard: a Guard not made by New still knows what programs start.
func TestZeroGuard(t *testing.T) {
	var g Guard
	wantBlocked(t, &g, "eval 'rm -rf x'", reasonRecursiveRm)
	wantBlocked(t, &g, "find . -exec rm -rf {} +", reasonRecursiveRm)
	wantAllowed(t, &g, "ls -la")
}

// TestInterpreters gives every interpreter its own table: inline code
// that must be refused, and calls that pass.
func TestInterpreters(t *testing.T) {
	tables := map[string]struct{ refused, allowed []string }{
		"python":    {[]string{`python -c "import os; os.system('rm -rf x')"`, "python -", "python"}, []string{"python -m http.server", "python script.py", "python -V"}},
		"pypy":      {[]string{`pypy3 -c 'import shutil; shutil.rmtree("x")'`}, []string{"pypy3 -c 'print(1)'"}},
		"perl":      {[]string{`perl -e 'system("rm -rf x")'`, `perl -i -pe 'system("reboot")' f`}, []string{"perl -pi -e 's/a/b/' f", "perl -v"}},
		"ruby":      {[]string{`ruby -e 'system("rm -rf x")'`}, []string{"ruby -e 'puts 1'", "ruby app.rb"}},
		"node":      {[]string{`node -e 'require("child_process").execSync("rm -rf x")'`, "node < x.js"}, []string{"node -e 'console.log(1)'", "node server.js"}},
		"nodejs":    {[]string{`nodejs --eval 'require("fs").rmSync("x", {recursive: true})'`}, []string{"nodejs --version"}},
		"bun":       {[]string{`bun -e 'Bun.spawnSync(["rm", "-rf", "x"])'`}, []string{"bun -e 'console.log(1)'"}},
		"deno":      {[]string{`deno eval 'Deno.run({cmd: ["rm", "-rf", "x"]})'`}, []string{"deno run main.ts", "deno eval 'console.log(1)'"}},
		"php":       {[]string{`php -r 'shell_exec("rm -rf x");'`}, []string{"php -r 'echo 1;'", "php -f index.php"}},
		"lua":       {[]string{`lua -e 'os.execute("rm -rf x")'`}, []string{"lua -e 'print(1)'"}},
		"luajit":    {[]string{`luajit -e 'os.execute("shutdown now")'`}, []string{"luajit script.lua"}},
		"awk":       {[]string{`awk 'BEGIN { system("rm -rf x") }'`, `awk '{ system($0) }' f`}, []string{"awk '{print $1}' f", "awk -f prog.awk f"}},
		"gawk":      {[]string{`gawk --source 'BEGIN { system("shutdown now") }'`}, []string{"gawk -F: '{print $1}' f"}},
		"mawk":      {[]string{`mawk '{ print | "sh" }' f`}, []string{"mawk 'NR==1' f"}},
		"nawk":      {[]string{`nawk 'BEGIN { "rm -rf x" | getline }'`}, []string{"nawk '{print NF}' f"}},
		"Rscript":   {[]string{`Rscript -e 'system("rm -rf x")'`}, []string{"Rscript -e 'print(1)'"}},
		"R":         {[]string{`R -e 'unlink("x", recursive=TRUE); system("rm -rf x")'`}, []string{"R --version"}},
		"julia":     {[]string{`julia -e 'run(["rm", "-rf", "x"])'`}, []string{"julia -e 'println(1)'"}},
		"expect":    {[]string{`expect -c 'spawn rm -rf x'`}, []string{"expect script.exp"}},
		"osascript": {[]string{`osascript -e 'do shell script "rm -rf x"'`}, []string{"osascript -e 'display dialog \"hi\"'"}},
		"tclsh":     {[]string{"tclsh", "echo 'exec rm -rf x' | tclsh"}, []string{"tclsh script.tcl"}},
	}
	g := mustGuard(t, Options{})
	for _, name := range slices.Sorted(maps.Keys(interpreters)) {
		t.Run(name, func(t *testing.T) {
			tab, ok := tables[name]
			if !ok || len(tab.refused) == 0 || len(tab.allowed) == 0 {
				t.Fatalf("interpreter %q has no table test with refused and allowed cases", name)
			}
			for _, s := range tab.refused {
				wantBlocked(t, g, s, "")
			}
			for _, s := range tab.allowed {
				wantAllowed(t, g, s)
			}
		})
	}
}

// TestSedCommands gives every sed command with arguments its own table:
// scripts and what scanSed must find in them.
func TestSedCommands(t *testing.T) {
	type want struct {
		script  string
		execs   int
		writes  int
		problem bool
	}
	m := string(computedMark)
	tables := map[byte][]want{
		computedMark: {{script: "1" + m, problem: true}, {script: "1,$!" + m, problem: true}, {script: m + "p"}},
		'l':          {{script: "l 5;1e ls", execs: 1}, {script: "l"}},
		'L':          {{script: "L 3;e ls", execs: 1}},
		'q':          {{script: "q 5\ne ls", execs: 1}, {script: "$q"}},
		'Q':          {{script: "Q1;e date", execs: 1}},
		':':          {{script: ":a;e ls;ba", execs: 1}},
		'b':          {{script: "b end;e ls\n:end", execs: 1}},
		't':          {{script: "s/a/b/;ta;e ls;:a", execs: 1}},
		'T':          {{script: "Tx;e ls;:x", execs: 1}},
		'v':          {{script: "v 4.2;e ls", execs: 1}},
		'a':          {{script: "a e rm -rf x; e ls"}, {script: "a\\\ne ls\ne ls", execs: 1}},
		'i':          {{script: "1i\\\ntext\\\ne text too"}},
		'c':          {{script: "$c e is text"}},
		'r':          {{script: "r file;e ls"}},
		'R':          {{script: "R file\ne ls", execs: 1}},
		'w':          {{script: "w out;e ls", writes: 1}, {script: "w /tmp/x\np", writes: 1}},
		'W':          {{script: "W out", writes: 1}},
		'e':          {{script: "e ls -l", execs: 1}, {script: "1e", problem: true}, {script: "e " + m, problem: true}},
		's':          {{script: "s/a/b/e", problem: true}, {script: "s/a/b/gw f", writes: 1}, {script: "s/e/e/g;e ls", execs: 1}, {script: "s/a/b/" + m, problem: true}, {script: "s"}},
		'y':          {{script: "y/e/f/;e ls", execs: 1}, {script: "y"}},
	}
	for _, letter := range slices.Sorted(maps.Keys(sedCommands)) {
		t.Run(strconv.QuoteRune(rune(letter)), func(t *testing.T) {
			if len(tables[letter]) == 0 {
				t.Fatalf("sed command %q has no table test", letter)
			}
			for _, tc := range tables[letter] {
				r := scanSed(tc.script)
				if len(r.execs) != tc.execs || len(r.writes) != tc.writes || (r.problem != "") != tc.problem {
					t.Errorf("scanSed(%q) = %+v, want %d execs, %d writes, problem %v", tc.script, r, tc.execs, tc.writes, tc.problem)
				}
			}
		})
	}
}
