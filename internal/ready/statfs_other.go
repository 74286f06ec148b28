//go:build !(linux || darwin || freebsd)

package ready

func freeBytes(string) (uint64, error) { return 0, ErrUnsupported }
