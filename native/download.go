package native

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"time"
)

// DefaultStallTimeout is how long a download may go without receiving a byte
// before it is abandoned. A total timeout would punish slow links; a stall
// timeout only catches servers (or networks) that stopped talking.
const DefaultStallTimeout = 30 * time.Second

// errStalled is the cancellation cause when the stall timer fires.
var errStalled = errors.New("stalled")

// fetchSpec is one download: where from, what it must be, and how to report.
type fetchSpec struct {
	URL          string
	SHA256       string // expected lowercase hex
	Size         int64  // expected bytes, > 0
	StallTimeout time.Duration
	Client       *http.Client
	Progress     io.Writer // nil: silent
}

// fetch streams the tarball at spec.URL into dst while hashing it and
// enforcing its size, so a wrong pack is refused without ever being opened.
// http, https and file URLs are accepted (file:// is how `make
// native-install` feeds a locally built pack through the same path).
func fetch(ctx context.Context, dst io.Writer, spec fetchSpec) error {
	u, err := url.Parse(spec.URL)
	if err != nil {
		return fmt.Errorf("cannot download native pack: bad URL %q: %w", spec.URL, err)
	}
	name := path.Base(u.Path)
	switch u.Scheme {
	case "file":
		return fetchFile(ctx, dst, u, name, spec)
	case "http", "https":
		return fetchHTTP(ctx, dst, name, spec)
	default:
		return fmt.Errorf("cannot download native pack: URL %q: scheme must be https, http or file", spec.URL)
	}
}

func fetchFile(ctx context.Context, dst io.Writer, u *url.URL, name string, spec fetchSpec) error {
	if u.Host != "" && u.Host != "localhost" {
		return fmt.Errorf("cannot read native pack %s: file URL names host %q", spec.URL, u.Host)
	}
	f, err := os.Open(u.Path)
	if err != nil {
		return fmt.Errorf("cannot read native pack: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() != spec.Size {
		return fmt.Errorf("native pack %s has the wrong size: expected %d bytes, actual %d", name, spec.Size, fi.Size())
	}
	return copyChecked(ctx, dst, f, name, spec, nil)
}

func fetchHTTP(ctx context.Context, dst io.Writer, name string, spec fetchSpec) error {
	stall := spec.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The stall timer covers connecting, waiting for headers and every gap
	// between body reads; each received byte pushes it back.
	timer := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer timer.Stop()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.URL, nil)
	if err != nil {
		return fmt.Errorf("cannot download native pack: %w", err)
	}
	client := spec.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return stalledOr(ctx, spec.URL, stall, fmt.Errorf("cannot download native pack from %s: %w", spec.URL, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cannot download native pack from %s: HTTP %s", spec.URL, resp.Status)
	}
	if resp.ContentLength >= 0 && resp.ContentLength != spec.Size {
		return fmt.Errorf("cannot download native pack from %s: server sends %d bytes, expected %d", spec.URL, resp.ContentLength, spec.Size)
	}
	err = copyChecked(ctx, dst, resp.Body, name, spec, func() { timer.Reset(stall) })
	return stalledOr(ctx, spec.URL, stall, err)
}

// stalledOr replaces err with a stall error when the stall timer caused it.
func stalledOr(ctx context.Context, url string, stall time.Duration, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errStalled) {
		return fmt.Errorf("cannot download native pack from %s: no data received for %s", url, stall)
	}
	return err
}

// copyChecked copies src to dst, refusing more than spec.Size bytes, fewer,
// or a sha256 other than spec.SHA256. tick runs after every read that
// delivered bytes.
func copyChecked(ctx context.Context, dst io.Writer, src io.Reader, name string, spec fetchSpec, tick func()) error {
	h := sha256.New()
	prog := newProgress(spec.Progress, name, spec.Size)
	buf := make([]byte, 256<<10)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if tick != nil {
				tick()
			}
			total += int64(n)
			if total > spec.Size {
				prog.done()
				return fmt.Errorf("native pack %s is too large: more than the expected %d bytes", name, spec.Size)
			}
			h.Write(buf[:n])
			if _, err := dst.Write(buf[:n]); err != nil {
				prog.done()
				return fmt.Errorf("cannot save native pack %s: %w", name, err)
			}
			prog.update(total)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			prog.done()
			if errors.Is(rerr, io.ErrUnexpectedEOF) {
				return fmt.Errorf("native pack %s is truncated: got %d of %d bytes", name, total, spec.Size)
			}
			return fmt.Errorf("cannot download native pack %s after %d of %d bytes: %w", name, total, spec.Size, rerr)
		}
	}
	prog.done()
	if total != spec.Size {
		return fmt.Errorf("native pack %s is truncated: got %d of %d bytes", name, total, spec.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != spec.SHA256 {
		return fmt.Errorf("native pack %s has the wrong sha256: expected %s, actual %s", name, spec.SHA256, sum)
	}
	return nil
}

// progress draws one self-overwriting line; it is only ever given a terminal.
type progress struct {
	w     io.Writer
	name  string
	size  int64
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, name string, size int64) *progress {
	return &progress{w: w, name: name, size: size}
}

func (p *progress) update(n int64) {
	if p.w == nil || (time.Since(p.last) < 200*time.Millisecond && n != p.size) {
		return
	}
	p.last, p.drawn = time.Now(), true
	fmt.Fprintf(p.w, "\rmlxgo: downloading %s: %.1f of %.1f MB (%d%%)", p.name,
		float64(n)/1e6, float64(p.size)/1e6, n*100/max(p.size, 1))
}

func (p *progress) done() {
	if p.w != nil && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// stderrIfTerminal is where progress goes by default: stderr, but only when
// a person is watching it (a character device), never into logs or pipes.
func stderrIfTerminal() io.Writer {
	fi, err := os.Stderr.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return os.Stderr
}
