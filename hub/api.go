package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the public hub; $HF_ENDPOINT replaces it.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to one hub endpoint with huggingface_hub's file API.
type Client struct {
	Endpoint string // no trailing slash
	Token    string // sent as a Bearer token to the endpoint's origin only
	// MetadataTimeout bounds the API call and each HEAD
	// ($HF_HUB_ETAG_TIMEOUT, 10 s); ReadTimeout is the longest wait for the
	// next bytes of a download ($HF_HUB_DOWNLOAD_TIMEOUT, 10 s).
	MetadataTimeout, ReadTimeout time.Duration
	HTTP                         *http.Client
	UserAgent                    string
}

// NewClient configures a client from huggingface_hub's variables:
// HF_ENDPOINT, HF_TOKEN / the token file, HF_HUB_ETAG_TIMEOUT,
// HF_HUB_DOWNLOAD_TIMEOUT (seconds).
func NewClient(getenv func(string) string) (*Client, error) {
	c := &Client{
		Endpoint:        strings.TrimRight(getenv("HF_ENDPOINT"), "/"),
		Token:           Token(getenv),
		MetadataTimeout: 10 * time.Second,
		ReadTimeout:     10 * time.Second,
		UserAgent:       "mlxgo",
	}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("HF_ENDPOINT=%q is not an http(s) URL", c.Endpoint)
	}
	for k, d := range map[string]*time.Duration{"HF_HUB_ETAG_TIMEOUT": &c.MetadataTimeout, "HF_HUB_DOWNLOAD_TIMEOUT": &c.ReadTimeout} {
		if s := getenv(k); s != "" {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%s=%q is not a positive number of seconds", k, s)
			}
			*d = time.Duration(n * float64(time.Second))
		}
	}
	c.HTTP = &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: c.MetadataTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   c.MetadataTimeout,
			ResponseHeaderTimeout: max(c.MetadataTimeout, c.ReadTimeout),
			MaxIdleConnsPerHost:   16,
			// Go would ask for gzip and undo it, hiding sizes and breaking ranges.
			DisableCompression: true,
		},
		// Redirects are followed by hand: the hub's headers are on the
		// redirect itself, and the token must not leave the hub's origin.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Sibling is one file of a repo revision as the API lists it.
type Sibling struct {
	Name   string `json:"rfilename"`
	Size   *int64 `json:"size"`
	BlobID string `json:"blobId"` // the git blob sha1
	LFS    *struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	} `json:"lfs"`
}

// RepoInfo is a repo at one revision: its commit and its files.
type RepoInfo struct {
	ID       string    `json:"id"`
	SHA      string    `json:"sha"`
	Siblings []Sibling `json:"siblings"`
}

// ParseRepoInfo decodes and checks the answer of /api/models/{id}/revision/{rev}.
func ParseRepoInfo(data []byte) (*RepoInfo, error) {
	var ri RepoInfo
	if err := json.Unmarshal(data, &ri); err != nil {
		return nil, fmt.Errorf("cannot parse the repo listing: %w", err)
	}
	if !IsCommit(ri.SHA) {
		return nil, fmt.Errorf("the repo listing names commit %q, not a 40-digit hash", ri.SHA)
	}
	seen := map[string]bool{}
	for _, s := range ri.Siblings {
		if err := checkRepoPath(s.Name); err != nil {
			return nil, fmt.Errorf("the repo listing holds a bad file name: %w", err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("the repo listing names %q twice", s.Name)
		}
		seen[s.Name] = true
		if s.Size != nil && *s.Size < 0 || s.LFS != nil && s.LFS.Size < 0 {
			return nil, fmt.Errorf("the repo listing gives %q a negative size", s.Name)
		}
		if s.LFS != nil && !isHex(s.LFS.SHA256, 64) {
			return nil, fmt.Errorf("the repo listing gives %q lfs sha256 %q", s.Name, s.LFS.SHA256)
		}
	}
	return &ri, nil
}

// checkRepoPath accepts a relative, slash-separated file name inside the
// repo: it becomes a path under the snapshot directory.
func checkRepoPath(name string) error {
	if name == "" || len(name) > 1024 || strings.HasPrefix(name, "/") {
		return fmt.Errorf("%q", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("%q", name)
		}
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%q", name)
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// RepoInfo lists repo at rev with file sizes and hashes (?blobs=true).
func (c *Client) RepoInfo(ctx context.Context, repo, rev string) (*RepoInfo, error) {
	u := c.Endpoint + "/api/models/" + repo + "/revision/" + url.PathEscape(rev) + "?blobs=true"
	ctx, cancel := context.WithTimeout(ctx, c.MetadataTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodGet, u, true)
	if err != nil {
		return nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, c.netError(ctx, u, err, "HF_HUB_ETAG_TIMEOUT", c.MetadataTimeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp, repo, rev, "")
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, c.netError(ctx, u, err, "HF_HUB_ETAG_TIMEOUT", c.MetadataTimeout)
	}
	ri, err := ParseRepoInfo(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return ri, nil
}

// newRequest sets the headers huggingface_hub sends; the token goes only
// to the endpoint's origin.
func (c *Client) newRequest(ctx context.Context, method, u string, auth bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.UserAgent)
	req.Header.Set("Accept-Encoding", "identity")
	if auth && c.Token != "" && sameOrigin(u, c.Endpoint) {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return ua.Scheme == ub.Scheme && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// StatusError is an answer of the hub that is not a success.
type StatusError struct {
	Code int
	msg  string
}

func (e *StatusError) Error() string { return e.msg }

// statusError says in one line what a failed answer means for the user;
// file is empty for the repo listing.
func (c *Client) statusError(resp *http.Response, repo, rev, file string) error {
	code := resp.Header.Get("X-Error-Code")
	what := repo + "@" + rev
	if file != "" {
		what = file + " of " + what
	}
	var msg string
	switch {
	case resp.StatusCode == http.StatusUnauthorized && c.Token == "":
		msg = fmt.Sprintf("the hub answered 401 Unauthorized for %s: the repository does not exist, or it is private or gated and needs a token (set HF_TOKEN or write it to $HF_HOME/token)", what)
	case resp.StatusCode == http.StatusUnauthorized:
		msg = fmt.Sprintf("the hub answered 401 Unauthorized for %s: the repository does not exist, or the token does not give access to it", what)
	case resp.StatusCode == http.StatusForbidden:
		msg = fmt.Sprintf("the hub answered 403 Forbidden for %s: the token may lack read access, or the repository is gated (accept its terms on the hub)", what)
	case resp.StatusCode == http.StatusNotFound && code == "RevisionNotFound":
		msg = fmt.Sprintf("revision %q not found in %s (404)", rev, repo)
	case resp.StatusCode == http.StatusNotFound && code == "EntryNotFound" || resp.StatusCode == http.StatusNotFound && file != "":
		msg = fmt.Sprintf("file %s not found (404)", what)
	case resp.StatusCode == http.StatusNotFound:
		msg = fmt.Sprintf("repository %s not found on %s (404)", repo, c.Endpoint)
	default:
		msg = fmt.Sprintf("the hub answered %s for %s", resp.Status, what)
	}
	if m := strings.TrimSpace(resp.Header.Get("X-Error-Message")); m != "" && len(m) < 300 {
		msg += ": " + m
	}
	return &StatusError{Code: resp.StatusCode, msg: msg}
}

// netError turns a transport failure into one line naming the host and,
// for a timeout, the variable that sets it. Cancellation passes through.
func (c *Client) netError(ctx context.Context, u string, err error, timeoutVar string, timeout time.Duration) error {
	host := u
	if pu, perr := url.Parse(u); perr == nil {
		host = pu.Host
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return err
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded):
		return &timeoutError{fmt.Sprintf("no answer from %s within %s (%s)", host, timeout, timeoutVar)}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return fmt.Errorf("cannot reach %s: %v", host, op.Err)
	}
	return fmt.Errorf("cannot reach %s: %v", host, err)
}

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }
func (e *timeoutError) Timeout() bool { return true }
