package workspace

import "testing"

func mkfifo(t *testing.T, _ string) { t.Skip("no named pipes in the file system here") }
