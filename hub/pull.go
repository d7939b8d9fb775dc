package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Options says what to pull.
type Options struct {
	Repo, Revision string
	GGUF           string   // take this .gguf file (--file) instead of safetensors
	Jobs           int      // files fetched at once (default 4)
	Progress       Progress // nil: none
}

// Result is a finished pull.
type Result struct {
	Repo       string       `json:"repo"`
	Revision   string       `json:"revision"`
	Commit     string       `json:"commit"`
	Snapshot   string       `json:"snapshot"`
	Path       string       `json:"path"` // what -m ORG/NAME resolves to
	Files      []FileResult `json:"files"`
	Downloaded int64        `json:"downloaded_bytes"`
}

// FileResult is one file of a pull.
type FileResult struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Blob       string `json:"blob"`   // the blob's name: sha256 (LFS) or git blob sha1
	Status     string `json:"status"` // "downloaded", "resumed" or "cached"
	Downloaded int64  `json:"downloaded_bytes"`
}

// Progress hears about a pull as it goes; calls come from several goroutines.
type Progress interface {
	// Begin: a file is wanted; have of its size bytes are on disk already.
	Begin(name string, size, have int64)
	// Bytes: n more bytes arrived (negative when a restart dropped them).
	Bytes(n int64)
	// End: the file is in the cache (err nil) or failed.
	End(r FileResult, err error)
}

type nopProgress struct{}

func (nopProgress) Begin(string, int64, int64) {}
func (nopProgress) Bytes(int64)                {}
func (nopProgress) End(FileResult, error)      {}

// Pull fetches the model files of a repo revision into the cache. Each file
// is downloaded into blobs/<hash>.incomplete (resumed from what is there),
// checked against its hash, and renamed into blobs/; only when every file is
// there does the snapshot get its links and the revision its ref. A
// cancelled or failed pull leaves the partial files for the next one.
func Pull(ctx context.Context, c *Client, cache Cache, opts Options) (*Result, error) {
	if opts.Revision == "" {
		opts.Revision = DefaultRevision
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 4
	}
	if opts.Progress == nil {
		opts.Progress = nopProgress{}
	}
	ri, err := c.RepoInfo(ctx, opts.Repo, opts.Revision)
	if err != nil {
		return nil, fmt.Errorf("cannot pull %s@%s: %w", opts.Repo, opts.Revision, err)
	}
	sel, err := Select(ri, opts.GGUF)
	if err != nil {
		return nil, err
	}
	p := &puller{c: c, cache: cache, repo: opts.Repo, commit: ri.SHA, progress: opts.Progress}
	if err := os.MkdirAll(cache.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the hub cache %s: %w", cache.Dir, err)
	}
	cache.tag()
	held, err := lockShared(ctx, cache.pullLock(p.repo))
	if err != nil {
		return nil, p.wrap(opts, err)
	}
	defer held.unlock()
	var results []FileResult
	files := sel.Files
	if sel.Index != nil {
		r, err := p.fetch(ctx, *sel.Index)
		if err != nil {
			return nil, p.wrap(opts, err)
		}
		results = append(results, r)
		data, err := os.ReadFile(cache.blobPath(p.repo, r.Blob))
		if err != nil {
			return nil, err
		}
		shards, err := Shards(ri, data)
		if err != nil {
			return nil, err
		}
		files = append(files, shards...)
	}
	rs, err := p.fetchAll(ctx, files, opts.Jobs)
	if err != nil {
		return nil, p.wrap(opts, err)
	}
	results = append(results, rs...)
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	for _, r := range results {
		if err := cache.link(p.repo, p.commit, r.Name, r.Blob); err != nil {
			return nil, fmt.Errorf("cannot link %s into the snapshot: %w", r.Name, err)
		}
	}
	if err := cache.writeRef(p.repo, opts.Revision, p.commit); err != nil {
		return nil, fmt.Errorf("cannot write refs/%s: %w", opts.Revision, err)
	}
	res := &Result{Repo: p.repo, Revision: opts.Revision, Commit: p.commit, Files: results,
		Snapshot: filepath.Join(cache.RepoDir(p.repo), "snapshots", p.commit)}
	res.Path = res.Snapshot
	if sel.GGUF != "" {
		res.Path = filepath.Join(res.Snapshot, filepath.FromSlash(sel.GGUF))
	}
	for _, r := range results {
		res.Downloaded += r.Downloaded
	}
	return res, nil
}

func (p *puller) wrap(opts Options, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("cannot pull %s@%s: %w", opts.Repo, opts.Revision, err)
}

type puller struct {
	c            *Client
	cache        Cache
	repo, commit string
	progress     Progress
}

// fetchAll fetches files with jobs workers, the largest first; the first
// failure stops the others (their partial files stay).
func (p *puller) fetchAll(ctx context.Context, files []Sibling, jobs int) ([]FileResult, error) {
	files = append([]Sibling(nil), files...)
	sort.SliceStable(files, func(i, j int) bool { return sizeOf(files[i]) > sizeOf(files[j]) })
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan Sibling)
	var (
		mu      sync.Mutex
		results []FileResult
		first   error
		wg      sync.WaitGroup
	)
	for range min(jobs, max(len(files), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				r, err := p.fetch(ctx, s)
				mu.Lock()
				if err != nil && first == nil {
					first = err
					cancel(err)
				}
				if err == nil {
					results = append(results, r)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, s := range files {
		select {
		case work <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx)
	}
	return results, first
}

func sizeOf(s Sibling) int64 {
	if s.LFS != nil {
		return s.LFS.Size
	}
	if s.Size != nil {
		return *s.Size
	}
	return 0
}

// fetch brings one file into blobs/, verified, under the blob's lock.
func (p *puller) fetch(ctx context.Context, s Sibling) (r FileResult, err error) {
	r = FileResult{Name: s.Name}
	defer func() {
		if err != nil && !errors.Is(err, context.Canceled) {
			p.progress.End(r, err)
		}
	}()
	meta, err := p.c.head(ctx, p.repo, p.commit, s.Name)
	if err != nil {
		return r, err
	}
	if meta.commit != p.commit {
		return r, fmt.Errorf("%s: the hub answered for commit %s while pulling commit %s", s.Name, meta.commit, p.commit)
	}
	d, err := expectDigest(s, meta)
	if err != nil {
		return r, err
	}
	r.Size, r.Blob = d.size, d.want
	l, err := lock(ctx, p.cache.lockPath(p.repo, r.Blob))
	if err != nil {
		return r, err
	}
	defer l.unlock()
	blob := p.cache.blobPath(p.repo, r.Blob)
	if st, err := os.Stat(blob); err == nil && st.Mode().IsRegular() && st.Size() == r.Size {
		r.Status = "cached"
		p.progress.Begin(s.Name, r.Size, r.Size)
		p.progress.End(r, nil)
		return r, nil
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return r, err
	}
	partial, err := os.OpenFile(blob+".incomplete", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return r, fmt.Errorf("cannot open %s: %w", blob+".incomplete", err)
	}
	defer func() {
		if partial != nil {
			partial.Close()
		}
	}()
	have, err := partial.Seek(0, io.SeekEnd)
	if err != nil {
		return r, err
	}
	if have > r.Size {
		if err := partial.Truncate(0); err != nil {
			return r, err
		}
		have = 0
	}
	if have > 0 {
		// The bytes already here count toward the hash; re-reading them
		// from disk is cheaper than fetching them again.
		if _, err := partial.Seek(0, io.SeekStart); err != nil {
			return r, err
		}
		if _, err := io.CopyN(d.h, partial, have); err != nil {
			return r, fmt.Errorf("cannot read %s: %w", partial.Name(), err)
		}
		r.Status = "resumed"
	} else {
		r.Status = "downloaded"
	}
	p.progress.Begin(s.Name, r.Size, have)
	got, err := p.c.download(ctx, meta.location, partial, have, d, s.Name, func(n int64) {
		r.Downloaded += n
		p.progress.Bytes(n)
	})
	if err != nil {
		return r, err
	}
	if err := d.check(s.Name); err != nil {
		partial.Close()
		partial = nil
		os.Remove(blob + ".incomplete")
		return r, fmt.Errorf("%w (the download is removed; the next pull starts it over)", err)
	}
	if got != r.Size {
		return r, fmt.Errorf("%s: got %d bytes, want %d", s.Name, got, r.Size)
	}
	if err := partial.Sync(); err != nil {
		return r, err
	}
	if err := partial.Close(); err != nil {
		partial = nil
		return r, err
	}
	partial = nil
	if err := os.Rename(blob+".incomplete", blob); err != nil {
		return r, err
	}
	p.progress.End(r, nil)
	return r, nil
}

// expectDigest is how a file is checked and what its blob is called: the
// listing's LFS sha256 or git blob sha1, which must agree with the ETag the
// hub sends (huggingface_hub names blobs by that ETag).
func expectDigest(s Sibling, m fileMeta) (*digest, error) {
	size := m.size
	switch {
	case s.LFS != nil:
		size = s.LFS.Size
	case s.Size != nil:
		size = *s.Size
	}
	if size < 0 {
		return nil, fmt.Errorf("%s: the hub gives no size", s.Name)
	}
	if m.size >= 0 && m.size != size {
		return nil, fmt.Errorf("%s: the hub lists %d bytes but its file answers %d", s.Name, size, m.size)
	}
	kind, want := "", ""
	switch {
	case s.LFS != nil:
		kind, want = "sha256", s.LFS.SHA256
	case isHex(s.BlobID, 40):
		kind, want = "sha1", s.BlobID
	case isHex(m.etag, 64):
		kind, want = "sha256", m.etag
	case isHex(m.etag, 40):
		kind, want = "sha1", m.etag
	default:
		return nil, fmt.Errorf("%s: the hub gives no hash to check it against (ETag %q)", s.Name, m.etag)
	}
	if m.etag != want {
		return nil, fmt.Errorf("%s: the hub's ETag %q disagrees with its listing (%s %s)", s.Name, m.etag, kind, want)
	}
	return newDigest(kind, want, size), nil
}
