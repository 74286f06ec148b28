//go:build !linux

// Control groups are a Linux kernel feature: on other systems New always
// fails, and the sandbox runs commands without a group of their own (it
// says so in its description).

package cgroups

import (
	"errors"
	"runtime"
	"syscall"
	"time"
)

// Limits are what every group is given. Zero means no limit of that kind.
type Limits struct {
	MaxProcs  int   // processes and threads at once
	MaxMemory int64 // bytes of memory
}

// Manager is never made on this system.
type Manager struct{}

// Group is never made on this system.
type Group struct{}

// New reports that control groups do not exist here.
func New(Limits) (*Manager, error) {
	return nil, errors.New("control groups are Linux-only, not available on " + runtime.GOOS)
}

// Describe says what the manager does.
func (m *Manager) Describe() string { return "none (" + runtime.GOOS + ")" }

// LimitsProcs reports false: nothing is limited.
func (m *Manager) LimitsProcs() bool { return false }

// LimitsMemory reports false: nothing is limited.
func (m *Manager) LimitsMemory() bool { return false }

// Kills reports false: there is no group to kill.
func (m *Manager) Kills() bool { return false }

// Get fails: there are no groups here.
func (m *Manager) Get() (*Group, error) { return nil, errors.New("control groups are Linux-only") }

// Close does nothing.
func (m *Manager) Close() {}

// Prepare does nothing.
func (g *Group) Prepare(*syscall.SysProcAttr) {}

// EnterThread fails: there are no groups here.
func (g *Group) EnterThread() error { return errors.New("control groups are Linux-only") }

// Kill reports false: nothing is known about the command's processes.
func (g *Group) Kill(time.Duration) bool { return false }

// AwaitEmpty reports false: there are no groups here.
func (g *Group) AwaitEmpty(time.Duration) bool { return false }

// Release does nothing.
func (g *Group) Release() {}
