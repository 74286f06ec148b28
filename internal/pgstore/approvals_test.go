package pgstore_test

import (
	"testing"

	"github.com/countbot/toolsvc/internal/approval/storetest"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
)

// TestApprovals: the approvals' table passes every store's checks, two
// replicas' connections deciding and using one approval at once
// included (storetest runs them from many goroutines over the pool).
func TestApprovals(t *testing.T) {
	url := pgtest.NewDatabase(t)
	storetest.Run(t, open(t, url, "r1").Approvals())
}
