package procgroup

import (
	"os"
	"testing"
	"time"
)

// TestReadStatCPU: the process's own CPU time grows with the work it
// does (busy until it does, within a generous bound for a loaded machine).
func TestReadStatCPU(t *testing.T) {
	before, ok := ReadStat(os.Getpid())
	if !ok {
		t.Fatal("no stat of the test process")
	}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		if after, _ := ReadStat(os.Getpid()); after.CPU > before.CPU {
			return
		}
	}
	t.Errorf("CPU ticks still %d after 30 s of busy work", before.CPU)
}
