//go:build unix

package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// fileLock is an exclusive flock(2) on a lock file, the lock
// huggingface_hub's filelock takes on the same path, so mlxgo and Python
// never download one blob at once. The kernel drops it when the process
// dies. The file stays (as huggingface_hub leaves it): deleting it could let
// a waiter lock a file nobody else sees.
type fileLock struct{ f *os.File }

// lock takes the lock at name, waiting until ctx is done; flock's blocking
// form cannot be interrupted, so we poll the non-blocking one.
func lock(ctx context.Context, name string) (*fileLock, error) {
	return flock(ctx, name, syscall.LOCK_EX)
}

// lockShared takes a shared lock at name (many holders, no exclusive one).
func lockShared(ctx context.Context, name string) (*fileLock, error) {
	return flock(ctx, name, syscall.LOCK_SH)
}

// tryLock takes the exclusive lock at name if nobody holds it; nil, nil
// when somebody does.
func tryLock(name string) (*fileLock, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, err := flock(ctx, name, syscall.LOCK_EX)
	if errors.Is(err, context.Canceled) {
		return nil, nil
	}
	return l, err
}

func flock(ctx context.Context, name string, how int) (*fileLock, error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the lock directory: %w", err)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file: %w", err)
	}
	delay := 10 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("cannot lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, context.Cause(ctx)
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

func (l *fileLock) unlock() {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
