package hub

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveWhilePulling: rm refuses, and prune skips, a repo a pull holds.
func TestRemoveWhilePulling(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	blobs := filepath.Join(c.RepoDir("org/m"), "blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, strings.Repeat("a", 64)+".incomplete"), []byte("partial"), 0o644)
	held, err := lockShared(context.Background(), c.pullLock("org/m"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := c.PlanRemove("org/m", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err == nil || !strings.Contains(err.Error(), "org/m is being pulled") {
		t.Fatalf("rm during a pull: %v", err)
	}
	if prune, err := c.PlanPrune(); err != nil || len(prune.Paths) != 0 {
		t.Fatalf("prune during a pull plans %v, %v", prune, err)
	}
	held.unlock()
	prune, err := c.PlanPrune()
	if err != nil || len(prune.Paths) != 1 || prune.Bytes != 7 {
		t.Fatalf("prune after the pull: %+v, %v", prune, err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.RepoDir("org/m")); !os.IsNotExist(err) {
		t.Fatalf("rm left the repo: %v", err)
	}
}
