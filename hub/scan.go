package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CachedRepo is one models--ORG--NAME directory of the cache.
type CachedRepo struct {
	ID        string
	Dir       string
	Size      int64 // every blob, partial downloads included
	Snapshots []CachedSnapshot
}

// CachedSnapshot is one snapshots/<commit> directory.
type CachedSnapshot struct {
	Commit string
	Refs   []string // the revisions naming this commit
	Dir    string
	Files  []string // slash-separated, sorted
	Size   int64    // the files' bytes, each blob once
	Broken []string // links to a missing blob
	blobs  map[string]bool
}

// Scan lists the model repos in the cache, sorted by id. A cache that does
// not exist yet is empty.
func (c Cache) Scan() ([]CachedRepo, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []CachedRepo
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "models--")
		if !ok || !e.IsDir() {
			continue
		}
		r, err := c.scanRepo(strings.ReplaceAll(name, "--", "/"))
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (c Cache) scanRepo(id string) (*CachedRepo, error) {
	r := &CachedRepo{ID: id, Dir: c.RepoDir(id)}
	blobs, _ := os.ReadDir(filepath.Join(r.Dir, "blobs"))
	for _, b := range blobs {
		if info, err := b.Info(); err == nil && info.Mode().IsRegular() {
			r.Size += info.Size()
		}
	}
	refs := map[string][]string{}
	refDir := filepath.Join(r.Dir, "refs")
	filepath.WalkDir(refDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			rel, _ := filepath.Rel(refDir, p)
			commit := strings.TrimSpace(string(b))
			refs[commit] = append(refs[commit], filepath.ToSlash(rel))
		}
		return nil
	})
	snaps, _ := os.ReadDir(filepath.Join(r.Dir, "snapshots"))
	for _, s := range snaps {
		if !s.IsDir() {
			continue
		}
		snap := CachedSnapshot{Commit: s.Name(), Dir: filepath.Join(r.Dir, "snapshots", s.Name()), Refs: refs[s.Name()], blobs: map[string]bool{}}
		sort.Strings(snap.Refs)
		err := filepath.WalkDir(snap.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(snap.Dir, p)
			rel = filepath.ToSlash(rel)
			st, err := os.Stat(p)
			if err != nil {
				snap.Broken = append(snap.Broken, rel)
				return nil
			}
			snap.Files = append(snap.Files, rel)
			if target, err := os.Readlink(p); err == nil {
				snap.blobs[filepath.Base(target)] = true
			}
			snap.Size += st.Size()
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(snap.Files)
		r.Snapshots = append(r.Snapshots, snap)
	}
	return r, nil
}

// Removal is what rm deletes: paths and the bytes they free.
type Removal struct {
	Paths []string
	Bytes int64
	cache Cache
	repos []string // the repos it touches: none may be being pulled
}

// Apply deletes the paths, unless a pull of one of the repos is running.
func (r *Removal) Apply() error {
	for _, repo := range r.repos {
		l, err := tryLock(r.cache.pullLock(repo))
		if err != nil {
			return err
		}
		if l == nil {
			return fmt.Errorf("%s is being pulled: remove it when the pull has finished", repo)
		}
		defer l.unlock()
	}
	for _, p := range r.Paths {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("cannot remove %s: %w", p, err)
		}
	}
	return nil
}

// PlanRemove says what removing repo deletes: with rev empty, the whole
// repo directory and its locks; with rev, that revision's snapshot, the
// refs naming it, and the blobs no other snapshot links to (the whole repo
// when no other snapshot is left).
func (c Cache) PlanRemove(repo, rev string) (*Removal, error) {
	dir := c.RepoDir(repo)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s is not in the cache at %s", repo, c.Dir)
	}
	r, err := c.scanRepo(repo)
	if err != nil {
		return nil, err
	}
	whole := &Removal{Paths: []string{dir, filepath.Join(c.Dir, ".locks", FolderName(repo))}, Bytes: r.Size, cache: c, repos: []string{repo}}
	if rev == "" {
		return whole, nil
	}
	_, commit, err := c.Snapshot(repo, rev)
	if err != nil {
		return nil, fmt.Errorf("%s@%s is not in the cache: %w", repo, rev, err)
	}
	var target *CachedSnapshot
	keep := map[string]bool{}
	for i, s := range r.Snapshots {
		if s.Commit == commit {
			target = &r.Snapshots[i]
			continue
		}
		for b := range s.blobs {
			keep[b] = true
		}
	}
	if len(r.Snapshots) == 1 {
		return whole, nil
	}
	out := &Removal{Paths: []string{target.Dir}, cache: c, repos: []string{repo}}
	for _, ref := range target.Refs {
		out.Paths = append(out.Paths, filepath.Join(dir, "refs", filepath.FromSlash(ref)))
	}
	var blobs []string
	for b := range target.blobs {
		if !keep[b] {
			blobs = append(blobs, b)
		}
	}
	sort.Strings(blobs)
	for _, b := range blobs {
		p := filepath.Join(dir, "blobs", b)
		if st, err := os.Stat(p); err == nil {
			out.Paths = append(out.Paths, p)
			out.Bytes += st.Size()
		}
	}
	return out, nil
}

// PlanPrune says what pruning the whole cache deletes: in every repo that
// no pull is writing, the blobs no snapshot links to and the partial
// downloads (blobs/*.incomplete).
func (c Cache) PlanPrune() (*Removal, error) {
	repos, err := c.Scan()
	if err != nil {
		return nil, err
	}
	out := &Removal{cache: c}
	for _, r := range repos {
		if l, err := tryLock(c.pullLock(r.ID)); err != nil || l == nil {
			continue // being pulled: its unlinked blobs are about to be linked
		} else {
			l.unlock()
		}
		out.repos = append(out.repos, r.ID)
		used := map[string]bool{}
		for _, s := range r.Snapshots {
			for b := range s.blobs {
				used[b] = true
			}
		}
		blobs, _ := os.ReadDir(filepath.Join(r.Dir, "blobs"))
		for _, b := range blobs {
			if used[b.Name()] {
				continue
			}
			if info, err := b.Info(); err == nil {
				out.Paths = append(out.Paths, filepath.Join(r.Dir, "blobs", b.Name()))
				out.Bytes += info.Size()
			}
		}
	}
	return out, nil
}
