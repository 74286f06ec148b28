package memory

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
)

// childEnv makes the test binary act as one writer process of
// TestMultiProcessWriters instead of running the tests.
const childEnv = "MEMORY_TEST_WRITER"

// TestMain runs the writer process when the test binary is re-executed by
// TestMultiProcessWriters.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := writerProcess(spec); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writerProcess writes goroutines x writes entries into the workspace named
// in spec ("proc,goroutines,writes,dir").
func writerProcess(spec string) error {
	var proc, goroutines, writes int
	var dir string
	if _, err := fmt.Sscanf(spec, "%d,%d,%d,%s", &proc, &goroutines, &writes, &dir); err != nil {
		return fmt.Errorf("bad spec %q: %v", spec, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	s := New(root, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < writes; i++ {
				if _, err := s.Write(context.Background(), "web", entryPayload(proc, g, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestMultiProcessWriters runs 4 processes of 8 goroutines writing 200
// entries each into one memory file and checks that exactly 6,400 intact
// entries result.
func TestMultiProcessWriters(t *testing.T) {
	const procs, goroutines, writes = 4, 8, 200
	if testing.Short() {
		t.Skip("writes 6,400 synced entries")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, dir := newStore(t)
	cmds := make([]*exec.Cmd, procs)
	for p := range cmds {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(p+1)+","+strconv.Itoa(goroutines)+","+strconv.Itoa(writes)+","+dir)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p] = cmd
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer process %d: %v", p+1, err)
		}
	}
	checkEntries(t, readFile(t, dir), procs, goroutines, writes)
	res, err := s.Search(context.Background(), []string{"payload"}, false, 1)
	if err != nil || res.Total != procs*goroutines*writes || res.Stats.Entries != procs*goroutines*writes {
		t.Fatalf("search total %d entries %d (%v)", res.Total, res.Stats.Entries, err)
	}
}
