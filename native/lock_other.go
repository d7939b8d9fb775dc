//go:build !unix

package native

import (
	"context"
	"fmt"
	"runtime"
)

// fileLock is not available here: packs exist only for Linux and macOS.
type fileLock struct{}

func lockFile(ctx context.Context, name string) (*fileLock, error) {
	return nil, fmt.Errorf("cannot lock %s: file locks are not supported on %s", name, runtime.GOOS)
}

func (l *fileLock) unlock() {}
