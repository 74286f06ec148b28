//go:build !unix

package workspace

import "os"

// renameOpen: on Windows an open file cannot be renamed; a file being
// written cannot be deleted either, which protects it instead of a lock.
const renameOpen = false

func lockTemp(*os.File) (unlock func()) { return func() {} }

func tryLockTemp(*os.File) (unlock func(), ok bool) { return func() {}, true }

// unlinked cannot tell a deleted folder here; the periodic comparison of
// the path with the open folder does.
func unlinked(os.FileInfo) bool { return false }
