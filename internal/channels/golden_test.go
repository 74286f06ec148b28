package channels

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files of the wire tests with what the senders
// send now: go test ./internal/channels/ -run Golden -update. Review the
// diff: it is the change on the wire.
var update = flag.Bool("update", false, "rewrite testdata/*.golden with the requests sent now")

// checkGolden compares got with testdata/name, or writes it there with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("the requests differ from %s (run with -update to accept them, and review the diff):\n--- got\n%s", path, got)
	}
}
