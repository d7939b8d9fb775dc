//go:build unix

package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// fileLock is an exclusive advisory lock on a lock file (flock(2)). The
// kernel drops it when the process dies, so a crashed installer never
// leaves the cache locked. The holder deletes the file before unlocking, so
// the cache keeps no lock files; a waiter that then wins the lock on the
// deleted file notices (the path no longer names its file) and retries.
type fileLock struct {
	f    *os.File
	name string
}

// lockFile takes the lock at name, waiting until ctx is done. flock's
// blocking form cannot be interrupted, so we poll the non-blocking one.
func lockFile(ctx context.Context, name string) (*fileLock, error) {
	delay := 10 * time.Millisecond
	for {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cannot open lock file: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if sameFile(f, name) {
				return &fileLock{f: f, name: name}, nil
			}
			err = syscall.EWOULDBLOCK // we locked a file its holder deleted: start over
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, fmt.Errorf("cannot lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot lock %s: %w", name, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// sameFile reports whether name still refers to the open file f.
func sameFile(f *os.File, name string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(name)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

func (l *fileLock) unlock() {
	os.Remove(l.name) // before unlocking, so nobody can lock a file we are about to delete
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
