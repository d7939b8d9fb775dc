//go:build !unix

package hub

import (
	"context"
	"fmt"
	"runtime"
)

// fileLock is not available here: mlxgo runs on Linux and macOS.
type fileLock struct{}

func lock(ctx context.Context, name string) (*fileLock, error) {
	return nil, fmt.Errorf("cannot lock %s: file locks are not supported on %s", name, runtime.GOOS)
}

func (l *fileLock) unlock() {}

func lockShared(ctx context.Context, name string) (*fileLock, error) { return lock(ctx, name) }

func tryLock(name string) (*fileLock, error) { return lock(context.Background(), name) }
