package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrCorrupt marks a download whose bytes do not hash to what the hub
// promised; nothing of it is kept.
var ErrCorrupt = errors.New("hash mismatch")

// fileMeta is what HEAD /{repo}/resolve/{commit}/{file} says, read as
// huggingface_hub reads it: the linked (LFS) etag and size win over the
// plain ones, and a redirect to another origin ends the walk with the
// download location.
type fileMeta struct {
	etag, commit, location string
	size                   int64 // -1 when not given
}

func (c *Client) resolveURL(repo, commit, name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return c.Endpoint + "/" + repo + "/resolve/" + commit + "/" + strings.Join(parts, "/")
}

func (c *Client) head(ctx context.Context, repo, commit, name string) (fileMeta, error) {
	u := c.resolveURL(repo, commit, name)
	ctx, cancel := context.WithTimeout(ctx, c.MetadataTimeout)
	defer cancel()
	for range 10 {
		req, err := c.newRequest(ctx, http.MethodHead, u, true)
		if err != nil {
			return fileMeta{}, err
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return fileMeta{}, c.netError(ctx, u, err, "HF_HUB_ETAG_TIMEOUT", c.MetadataTimeout)
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fileMeta{}, c.statusError(resp, repo, commit, name)
		}
		loc := resp.Header.Get("Location")
		redirect := resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != ""
		if redirect {
			target, err := resp.Request.URL.Parse(loc)
			if err != nil {
				return fileMeta{}, fmt.Errorf("%s: bad redirect %q", u, loc)
			}
			if sameOrigin(target.String(), u) {
				u = target.String()
				continue
			}
			loc = target.String()
		} else {
			loc = u
		}
		m := fileMeta{
			commit:   resp.Header.Get("X-Repo-Commit"),
			etag:     normalizeETag(firstNonEmpty(resp.Header.Get("X-Linked-Etag"), resp.Header.Get("ETag"))),
			location: loc,
			size:     -1,
		}
		sz := resp.Header.Get("X-Linked-Size")
		if sz == "" && !redirect {
			sz = resp.Header.Get("Content-Length")
		}
		if n, err := strconv.ParseInt(sz, 10, 64); err == nil && n >= 0 {
			m.size = n
		}
		if m.commit == "" {
			return fileMeta{}, fmt.Errorf("%s has no X-Repo-Commit header: HF_ENDPOINT (%s) does not look like a Hugging Face hub", u, c.Endpoint)
		}
		return m, nil
	}
	return fileMeta{}, fmt.Errorf("%s: too many redirects", u)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// normalizeETag drops a weak marker and the quotes.
func normalizeETag(s string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(s), "W/"), `"`)
}

// digest checks a blob's bytes: sha256 for LFS files (the LFS oid), the git
// blob sha1 ("blob <size>\0" then the bytes) for files kept in git.
type digest struct {
	kind string // "sha256" or "sha1"
	want string
	h    hash.Hash
	size int64
}

func newDigest(kind, want string, size int64) *digest {
	d := &digest{kind: kind, want: want, size: size}
	d.reset()
	return d
}

func (d *digest) reset() {
	if d.kind == "sha256" {
		d.h = sha256.New()
		return
	}
	d.h = sha1.New()
	fmt.Fprintf(d.h, "blob %d\x00", d.size)
}

func (d *digest) check(name string) error {
	if got := hex.EncodeToString(d.h.Sum(nil)); got != d.want {
		what := "sha256"
		if d.kind == "sha1" {
			what = "git blob sha1"
		}
		return fmt.Errorf("%s: %w: %s %s, want %s", name, ErrCorrupt, what, got, d.want)
	}
	return nil
}

// download completes partial (holding have bytes already hashed into d)
// from loc, resuming with a Range request, and retrying a broken or
// stalled transfer as long as it makes progress.
func (c *Client) download(ctx context.Context, loc string, partial *os.File, have int64, d *digest, name string, onBytes func(int64)) (int64, error) {
	stalls := 0
	for {
		if have == d.size {
			return have, nil
		}
		n, err := c.getRange(ctx, loc, partial, have, d, name, onBytes)
		have += n
		var restart restartError
		switch {
		case err == nil:
			if have != d.size {
				return have, fmt.Errorf("%s: the transfer ended at %d of %d bytes", name, have, d.size)
			}
			return have, nil
		case errors.As(err, &restart):
			have = 0
			continue
		case ctx.Err() != nil:
			return have, context.Cause(ctx)
		case !retryable(err):
			return have, err
		}
		if n > 0 {
			stalls = 0
		}
		if stalls++; stalls > 2 {
			return have, err
		}
		select {
		case <-ctx.Done():
			return have, context.Cause(ctx)
		case <-time.After(time.Duration(stalls) * 250 * time.Millisecond):
		}
	}
}

// restartError: the server ignored the Range; the file was truncated and
// the download starts over.
type restartError struct{}

func (restartError) Error() string { return "restart" }

func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == 408 || se.Code == 429 || se.Code == 502 || se.Code == 503 || se.Code == 504
	}
	return !errors.Is(err, ErrCorrupt)
}

// getRange makes one GET of loc from byte have on, appending what arrives
// to partial and d, and returns how many bytes it appended.
func (c *Client) getRange(ctx context.Context, loc string, partial *os.File, have int64, d *digest, name string, onBytes func(int64)) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := c.newRequest(ctx, http.MethodGet, loc, true)
	if err != nil {
		return 0, err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	// A stalled transfer is cancelled after ReadTimeout without a byte.
	stall := &idleTimer{d: c.ReadTimeout, cancel: cancel}
	stall.arm()
	defer stall.stop()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, c.readError(ctx, loc, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return 0, fmt.Errorf("%s: asked for bytes from %d, got %q", name, have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 { // the range was ignored: start over
			if err := partial.Truncate(0); err != nil {
				return 0, err
			}
			d.reset()
			onBytes(-have)
			return 0, restartError{}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// What we hold is not a prefix of this file (it is longer or the
		// file changed): start over.
		if err := partial.Truncate(0); err != nil {
			return 0, err
		}
		d.reset()
		onBytes(-have)
		return 0, restartError{}
	default:
		return 0, &StatusError{Code: resp.StatusCode, msg: fmt.Sprintf("the download of %s answered %s", name, resp.Status)}
	}
	if _, err := partial.Seek(have, io.SeekStart); err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			stall.arm()
			if n+have+int64(k) > d.size {
				return n, fmt.Errorf("%s: the server sent more than the %d bytes the hub listed", name, d.size)
			}
			if _, err := partial.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("cannot write %s: %w", partial.Name(), err)
			}
			d.h.Write(buf[:k])
			n += int64(k)
			onBytes(int64(k))
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, c.readError(ctx, loc, rerr)
		}
	}
}

func (c *Client) readError(ctx context.Context, loc string, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) {
		host := loc
		if u, perr := url.Parse(loc); perr == nil {
			host = u.Host
		}
		return &timeoutError{fmt.Sprintf("no data from %s for %s (HF_HUB_DOWNLOAD_TIMEOUT)", host, c.ReadTimeout)}
	}
	return c.netError(ctx, loc, err, "HF_HUB_DOWNLOAD_TIMEOUT", c.ReadTimeout)
}

// rangeStart reads the first byte position of "bytes A-B/N".
func rangeStart(cr string) (int64, bool) {
	s, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	a, _, ok := strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(a, 10, 64)
	return n, err == nil && n >= 0
}

var errStalled = errors.New("stalled")

// idleTimer cancels a transfer that has received nothing for d.
type idleTimer struct {
	mu     sync.Mutex
	d      time.Duration
	t      *time.Timer
	cancel context.CancelCauseFunc
}

func (s *idleTimer) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t == nil {
		s.t = time.AfterFunc(s.d, func() { s.cancel(errStalled) })
		return
	}
	s.t.Reset(s.d)
}

func (s *idleTimer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t != nil {
		s.t.Stop()
	}
}
