//go:build unix && !linux

package audit

// oNoATime: no O_NOATIME here.
const oNoATime = 0
