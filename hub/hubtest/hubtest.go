// Package hubtest is a local Hugging Face hub for tests: the file API as
// huggingface_hub uses it (the repo listing, the tree, HEAD and GET of
// /{repo}/resolve/{rev}/{file} with ETag, X-Repo-Commit and X-Linked-*
// headers, LFS files redirected to a separate content host, Range
// requests), serving files from disk or memory, with byte counters and
// injected faults (a status, a corrupted byte, a stall).
package hubtest

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// File is one file of a repo.
type File struct {
	Name   string
	Size   int64
	SHA256 string
	SHA1   string // the git blob sha1 (of the LFS pointer when LFS)
	LFS    bool
	path   string // on disk, or
	data   []byte
}

func (f *File) open() (io.ReadSeekCloser, error) {
	if f.path != "" {
		return os.Open(f.path)
	}
	return nopCloser{strings.NewReader(string(f.data))}, nil
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

// Repo is a model repo with one commit, on branch main.
type Repo struct {
	ID     string
	Commit string
	Files  map[string]*File
}

// Fault changes how one file (by name) is served.
type Fault struct {
	Status     int   // answer this status to HEAD and GET instead
	CorruptAt  int64 // flip the byte at this offset of the content (-1: none)
	StallAfter int64 // send this many bytes of the content, then hang (-1: none)
}

// NoFault is a Fault that changes nothing.
var NoFault = Fault{CorruptAt: -1, StallAfter: -1}

// Server is the hub (URL) and its content host (CDN).
type Server struct {
	Hub, CDN *httptest.Server
	// Token, when set, is the Bearer token the hub requires.
	Token string
	// APIStatus answers the repo listing with this status; APIStall hangs it.
	APIStatus int
	APIStall  bool

	mu      sync.Mutex
	repos   map[string]*Repo
	bySHA   map[string]*File
	faults  map[string]Fault
	served  map[string]int64
	ranges  map[string][]string
	cdnAuth bool
	active  int
	release chan struct{}
}

// New starts a hub and its content host.
func New() *Server {
	s := &Server{repos: map[string]*Repo{}, bySHA: map[string]*File{}, faults: map[string]Fault{},
		served: map[string]int64{}, ranges: map[string][]string{}, release: make(chan struct{})}
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	return s
}

// URL is the hub's endpoint, for HF_ENDPOINT.
func (s *Server) URL() string { return s.Hub.URL }

// Close stops both servers, releasing any stalled transfer.
func (s *Server) Close() {
	s.Release()
	s.Hub.CloseClientConnections()
	s.CDN.CloseClientConnections()
	s.Hub.Close()
	s.CDN.Close()
}

// Release lets every stalled transfer go on (and later ones not stall).
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
	for k, f := range s.faults {
		f.StallAfter = -1
		s.faults[k] = f
	}
}

// AddDir serves every regular file under dir as repo id; files of 1 MiB or
// more and weights are LFS files, as the hub keeps them.
func (s *Server) AddDir(id, dir string) (*Repo, error) {
	files := map[string]*File{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f, err := fileFrom(filepath.ToSlash(rel), p, nil)
		if err != nil {
			return err
		}
		files[f.Name] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.add(id, files), nil
}

// AddFiles serves files given in memory (name -> content) as repo id.
func (s *Server) AddFiles(id string, contents map[string][]byte) *Repo {
	files := map[string]*File{}
	for name, b := range contents {
		f, _ := fileFrom(name, "", b)
		files[name] = f
	}
	return s.add(id, files)
}

func fileFrom(name, path string, data []byte) (*File, error) {
	f := &File{Name: name, path: path, data: data}
	r, err := f.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return nil, err
	}
	f.Size, f.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	ext := filepath.Ext(name)
	f.LFS = n >= 1<<20 || ext == ".safetensors" || ext == ".gguf" || ext == ".bin"
	g := sha1.New()
	if f.LFS {
		ptr := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", f.SHA256, n)
		fmt.Fprintf(g, "blob %d\x00%s", len(ptr), ptr)
	} else {
		fmt.Fprintf(g, "blob %d\x00", n)
		r.Seek(0, io.SeekStart)
		io.Copy(g, r)
	}
	f.SHA1 = hex.EncodeToString(g.Sum(nil))
	return f, nil
}

func (s *Server) add(id string, files map[string]*File) *Repo {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha1.New()
	fmt.Fprintln(h, id)
	for _, n := range names {
		fmt.Fprintln(h, n, files[n].SHA1)
	}
	r := &Repo{ID: id, Commit: hex.EncodeToString(h.Sum(nil)), Files: files}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[id] = r
	for _, f := range files {
		s.bySHA[f.SHA256] = f
	}
	return r
}

// File is the file called name of repo id (nil if none).
func (s *Server) File(id, name string) *File {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[id]; r != nil {
		return r.Files[name]
	}
	return nil
}

// Blob is the name huggingface_hub gives the file's blob: the sha256 of an
// LFS file, the git blob sha1 of another.
func (f *File) Blob() string {
	if f.LFS {
		return f.SHA256
	}
	return f.SHA1
}

// SetFault changes how the file called name is served (NoFault to reset).
func (s *Server) SetFault(name string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[name] = f
}

// Served is how many content bytes of the file called name went out.
func (s *Server) Served(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[name]
}

// Ranges are the Range headers of the content GETs of name ("" for none).
func (s *Server) Ranges(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges[name]...)
}

// ResetCounters zeroes Served and Ranges.
func (s *Server) ResetCounters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served, s.ranges = map[string]int64{}, map[string][]string{}
}

// WaitIdle waits until no content transfer is in progress (a client that
// went away has been noticed), at most d.
func (s *Server) WaitIdle(d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		n := s.active
		s.mu.Unlock()
		if n == 0 {
			return true
		}
	}
	return false
}

// CDNSawAuth reports whether the content host ever got an Authorization header.
func (s *Server) CDNSawAuth() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cdnAuth
}

func (s *Server) fault(name string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.faults[name]; ok {
		return f
	}
	return NoFault
}

// lookup finds the repo and the revision; it answers the error itself.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, id, rev string) *Repo {
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		w.Header().Set("X-Error-Message", "Invalid credentials in Authorization header")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return nil
	}
	s.mu.Lock()
	repo := s.repos[id]
	s.mu.Unlock()
	if repo == nil {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
		return nil
	}
	if rev != "main" && rev != repo.Commit {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id: "+rev, http.StatusNotFound)
		return nil
	}
	return repo
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/api/models/"); ok {
		parts := strings.SplitN(rest, "/", 4)
		if len(parts) == 4 && (parts[2] == "revision" || parts[2] == "tree") {
			s.serveAPI(w, r, parts[0]+"/"+parts[1], parts[2], parts[3])
			return
		}
	}
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 5)
	if len(parts) == 5 && parts[2] == "resolve" {
		s.serveResolve(w, r, parts[0]+"/"+parts[1], parts[3], parts[4])
		return
	}
	http.NotFound(w, r)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, id, kind, rev string) {
	if s.APIStall {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return
	}
	if s.APIStatus != 0 {
		http.Error(w, http.StatusText(s.APIStatus), s.APIStatus)
		return
	}
	repo := s.lookup(w, r, id, rev)
	if repo == nil {
		return
	}
	names := make([]string, 0, len(repo.Files))
	for n := range repo.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out any
	if kind == "tree" {
		var entries []map[string]any
		for _, n := range names {
			f := repo.Files[n]
			e := map[string]any{"type": "file", "oid": f.SHA1, "size": f.Size, "path": n}
			if f.LFS {
				e["lfs"] = map[string]any{"oid": f.SHA256, "size": f.Size, "pointerSize": 134}
			}
			entries = append(entries, e)
		}
		out = entries
	} else {
		var sib []map[string]any
		for _, n := range names {
			f := repo.Files[n]
			e := map[string]any{"rfilename": n}
			if r.URL.Query().Get("blobs") == "true" {
				e["size"], e["blobId"] = f.Size, f.SHA1
				if f.LFS {
					e["lfs"] = map[string]any{"sha256": f.SHA256, "size": f.Size, "pointerSize": 134}
				}
			}
			sib = append(sib, e)
		}
		out = map[string]any{"id": id, "modelId": id, "sha": repo.Commit, "private": false, "siblings": sib,
			"lastModified": "2026-01-01T00:00:00.000Z", "tags": []string{}}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, id, rev, name string) {
	repo := s.lookup(w, r, id, rev)
	if repo == nil {
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	f := repo.Files[name]
	if f == nil {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	if st := s.fault(name).Status; st != 0 {
		http.Error(w, http.StatusText(st), st)
		return
	}
	if f.LFS {
		w.Header().Set("X-Linked-Etag", `"`+f.SHA256+`"`)
		w.Header().Set("X-Linked-Size", strconv.FormatInt(f.Size, 10))
		w.Header().Set("ETag", `"`+f.SHA1+`"`)
		w.Header().Set("Location", s.CDN.URL+"/blobs/"+f.SHA256+"?name="+name)
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+f.SHA1+`"`)
	s.serveContent(w, r, f)
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		s.mu.Lock()
		s.cdnAuth = true
		s.mu.Unlock()
	}
	sha, ok := strings.CutPrefix(r.URL.Path, "/blobs/")
	s.mu.Lock()
	f := s.bySHA[sha]
	s.mu.Unlock()
	if !ok || f == nil {
		http.NotFound(w, r)
		return
	}
	s.serveContent(w, r, f)
}

// serveContent serves f with Range support, counting what goes out and
// applying its fault.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, f *File) {
	body, err := f.open()
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	defer body.Close()
	if r.Method == http.MethodGet {
		s.mu.Lock()
		s.ranges[f.Name] = append(s.ranges[f.Name], r.Header.Get("Range"))
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/octet-stream") // no sniffing read
	cw := &countingWriter{ResponseWriter: w, s: s, name: f.Name}
	fr := &faultReader{r: body, fault: s.fault(f.Name), ctx: r.Context(), release: s.release, flush: cw.Flush}
	http.ServeContent(cw, r, "", time.Time{}, fr)
}

type countingWriter struct {
	http.ResponseWriter
	s    *Server
	name string
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.s.mu.Lock()
	c.s.served[c.name] += int64(n)
	c.s.mu.Unlock()
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type faultReader struct {
	r       io.ReadSeeker
	pos     int64
	fault   Fault
	ctx     context.Context
	release chan struct{}
	flush   func()
}

func (f *faultReader) Seek(off int64, whence int) (int64, error) {
	n, err := f.r.Seek(off, whence)
	f.pos = n
	return n, err
}

func (f *faultReader) Read(b []byte) (int, error) {
	if st := f.fault.StallAfter; st >= 0 {
		if f.pos >= st {
			f.flush()
			select {
			case <-f.ctx.Done():
				return 0, f.ctx.Err()
			case <-f.release:
			}
			f.fault.StallAfter = -1
		} else if int64(len(b)) > st-f.pos {
			b = b[:st-f.pos]
		}
	}
	n, err := f.r.Read(b)
	if c := f.fault.CorruptAt; c >= f.pos && c < f.pos+int64(n) {
		b[c-f.pos] ^= 0x01
	}
	f.pos += int64(n)
	return n, err
}
