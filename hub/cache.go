// Package hub downloads model repositories from a Hugging Face hub into the
// hub cache, and reads, lists and prunes that cache, exactly in the layout
// huggingface_hub writes and reads (so Python tools share it):
//
//	<cache>/models--ORG--NAME/blobs/<etag>            file contents, by hash
//	<cache>/models--ORG--NAME/blobs/<etag>.incomplete a download in progress
//	<cache>/models--ORG--NAME/refs/<revision>         the commit a branch or tag names
//	<cache>/models--ORG--NAME/snapshots/<commit>/<file> -> ../../blobs/<etag>
//	<cache>/.locks/models--ORG--NAME/<etag>.lock      one downloader per blob
//
// A file enters a snapshot only as a link to a blob whose hash has been
// checked, and a ref is written only once its snapshot is complete. The
// package never loads a model; it only moves and checks bytes.
package hub

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CacheDir is huggingface_hub's cache directory: $HF_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
func CacheDir(getenv func(string) string) string {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	return filepath.Join(hfHome(getenv), "hub")
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
func hfHome(getenv func(string) string) string {
	if d := getenv("HF_HOME"); d != "" {
		return d
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// Token is the access token huggingface_hub would send: $HF_TOKEN (or the
// older $HUGGING_FACE_HUB_TOKEN), else the token file ($HF_TOKEN_PATH,
// default $HF_HOME/token). Empty when there is none.
func Token(getenv func(string) string) string {
	for _, k := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(getenv(k)); t != "" {
			return t
		}
	}
	path := getenv("HF_TOKEN_PATH")
	if path == "" {
		path = filepath.Join(hfHome(getenv), "token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Cache is one hub cache directory.
type Cache struct{ Dir string }

// FolderName is the repo's directory name in the cache: models--ORG--NAME.
func FolderName(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// RepoDir is the repo's directory in the cache.
func (c Cache) RepoDir(repo string) string { return filepath.Join(c.Dir, FolderName(repo)) }

func (c Cache) blobPath(repo, etag string) string {
	return filepath.Join(c.RepoDir(repo), "blobs", etag)
}

func (c Cache) lockPath(repo, etag string) string {
	return filepath.Join(c.Dir, ".locks", FolderName(repo), etag+".lock")
}

// pullLock is held shared by every pull of repo and exclusively by rm, so
// nothing is removed from under a pull (blob locks use hex names; this
// one cannot collide with them).
func (c Cache) pullLock(repo string) string { return c.lockPath(repo, "mlxgo-pull") }

// ErrNotCached marks a repo or revision that the cache does not hold.
var ErrNotCached = errors.New("not in the cache")

// notCached says what is missing and is ErrNotCached.
type notCached string

func (e notCached) Error() string        { return string(e) }
func (e notCached) Is(target error) bool { return target == ErrNotCached }

// Snapshot finds the snapshot directory of repo at rev (a branch, tag or
// commit) and its commit: refs/<rev> names the commit, or rev is one.
func (c Cache) Snapshot(repo, rev string) (dir, commit string, err error) {
	rd := c.RepoDir(repo)
	if _, err := os.Stat(rd); err != nil {
		return "", "", notCached("no " + FolderName(repo))
	}
	ref, err := os.ReadFile(filepath.Join(rd, "refs", filepath.FromSlash(rev)))
	switch {
	case err == nil:
		commit = strings.TrimSpace(string(ref))
		if commit == "" || strings.ContainsAny(commit, `/\`) || commit == "." || commit == ".." {
			return "", "", fmt.Errorf("refs/%s holds %q, not a revision", rev, commit)
		}
	case errors.Is(err, os.ErrNotExist) && IsCommit(rev):
		commit = rev
	case errors.Is(err, os.ErrNotExist):
		return "", "", notCached("no refs/" + rev)
	default:
		return "", "", err
	}
	dir = filepath.Join(rd, "snapshots", commit)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", "", notCached("no snapshot " + commit)
	}
	return dir, commit, nil
}

// writeRef records that rev names commit, atomically (a reader sees the
// old ref or the new one, never a torn file), as huggingface_hub does.
func (c Cache) writeRef(repo, rev, commit string) error {
	if rev == commit {
		return nil
	}
	p := filepath.Join(c.RepoDir(repo), "refs", filepath.FromSlash(rev))
	if b, err := os.ReadFile(p); err == nil && string(b) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(p, []byte(commit))
}

// link makes snapshots/<commit>/<name> a relative link to the blob, replacing
// whatever was there in one rename (so a reader never finds it missing).
func (c Cache) link(repo, commit, name, etag string) error {
	dst := filepath.Join(c.RepoDir(repo), "snapshots", commit, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), c.blobPath(repo, etag))
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(dst); err == nil && cur == rel {
		return nil
	}
	tmp := fmt.Sprintf("%s.%s.tmp", dst, rand.Text()[:12]) // unique per pull, even in one process
	if err := os.Symlink(rel, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// cachedirTag marks the cache for backup tools, as huggingface_hub does.
const cachedirTag = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by huggingface_hub.\n# For information about cache directory tags, see:\n#\thttps://bford.info/cachedir/\n"

func (c Cache) tag() {
	p := filepath.Join(c.Dir, "CACHEDIR.TAG")
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		_ = os.WriteFile(p, []byte(cachedirTag), 0o644)
	}
}

// writeFileAtomic writes data to a temporary file beside p and renames it
// over p.
func writeFileAtomic(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
