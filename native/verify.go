package native

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
)

// Pack is a native pack on disk that this binary can load.
type Pack struct {
	Dir      string    // absolute directory holding manifest.json
	Source   string    // where Resolve found it: SourceEnv, SourceBesideExecutable, SourceCache or SourceDownload
	Manifest *Manifest // the pack's parsed manifest
}

// Pack sources, as reported by verify-native.
const (
	SourceEnv              = "env"
	SourceBesideExecutable = "beside-executable"
	SourceCache            = "cache"
	SourceDownload         = "download"
)

// ShimPath is the file the Go bindings dlopen: our C ABI shim, which pulls in
// libmlx.so beside it through its RUNPATH.
func (p *Pack) ShimPath() string { return filepath.Join(p.Dir, filepath.FromSlash(p.Manifest.Shim)) }

// LibraryPath is MLX's own shared library inside the pack.
func (p *Pack) LibraryPath() string {
	return filepath.Join(p.Dir, filepath.FromSlash(p.Manifest.Library))
}

// Open reads the pack in dir and checks it cheaply: the manifest parses and
// every listed file exists as a regular file of the listed size. Content is
// checked by Verify, which reads every byte.
func Open(dir string) (*Pack, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open native pack %s: %w", dir, err)
	}
	data, err := readManifestFile(filepath.Join(abs, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("cannot open native pack %s: %w", abs, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("cannot open native pack %s: %w", abs, err)
	}
	for _, f := range m.Files {
		fi, err := os.Lstat(filepath.Join(abs, filepath.FromSlash(f.Path)))
		switch {
		case err != nil:
			return nil, fmt.Errorf("native pack %s is incomplete: %s is missing", abs, f.Path)
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("native pack %s is damaged: %s is not a regular file", abs, f.Path)
		case fi.Size() != f.Size:
			return nil, fmt.Errorf("native pack %s is damaged: %s has %d bytes, the manifest says %d", abs, f.Path, fi.Size(), f.Size)
		}
	}
	return &Pack{Dir: abs, Manifest: m}, nil
}

func readManifestFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxManifestSize {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", ManifestName, maxManifestSize)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && fi.Size() > 0 {
		return nil, fmt.Errorf("cannot read %s: %w", ManifestName, err)
	}
	return b, nil
}

// checkFor reports why the pack cannot serve this binary on this host, or
// nil: the pack version must be exactly the one compiled in (the shim's ABI
// changes with it), the OS and architecture must match, and the variant must
// be a known one that serves device (when device is forced).
func (p *Pack) checkFor(packVersion, goos, goarch, device string) error {
	m := p.Manifest
	if m.PackVersion != packVersion {
		return fmt.Errorf("pack version is %s, this mlxgo needs %s", m.PackVersion, packVersion)
	}
	if m.OS != goos || m.Arch != goarch {
		return fmt.Errorf("pack is for %s/%s, this is %s/%s", m.OS, m.Arch, goos, goarch)
	}
	v, ok := LookupVariant(m.Variant)
	if !ok {
		return fmt.Errorf("pack variant %q is unknown to this mlxgo", m.Variant)
	}
	if v.OS != m.OS || v.Arch != m.Arch {
		return fmt.Errorf("pack variant %s is for %s/%s, not %s/%s", v.Name, v.OS, v.Arch, m.OS, m.Arch)
	}
	if device != "" && !v.Serves(device) {
		return fmt.Errorf("pack variant %s does not serve MLXGO_DEVICE=%s", v.Name, device)
	}
	return nil
}

// FileError is one file of a pack that does not match its manifest.
type FileError struct {
	Path           string // relative to the pack root
	Problem        string // "missing", "not a regular file", "changed" or "not in the manifest"
	ExpectedSHA256 string
	ActualSHA256   string
	ExpectedSize   int64
	ActualSize     int64
	Err            error // the I/O error, when the file could not be read
}

func (e *FileError) Error() string {
	switch e.Problem {
	case "changed":
		s := fmt.Sprintf("pack file %s does not match the manifest: expected sha256 %s, actual sha256 %s", e.Path, e.ExpectedSHA256, e.ActualSHA256)
		if e.ExpectedSize != e.ActualSize {
			s += fmt.Sprintf(" (expected %d bytes, actual %d)", e.ExpectedSize, e.ActualSize)
		}
		return s
	case "not in the manifest":
		// An extra library beside libmlx.so would be found through RUNPATH
		// before the system's, so extras are as suspect as changed files.
		return fmt.Sprintf("pack file %s is not in the manifest", e.Path)
	}
	if e.Err != nil {
		return fmt.Sprintf("pack file %s: %s: %v", e.Path, e.Problem, e.Err)
	}
	return fmt.Sprintf("pack file %s: %s", e.Path, e.Problem)
}

func (e *FileError) Unwrap() error { return e.Err }

// Verify reads every file of the pack and compares its size and sha256 with
// the manifest; it also reports files in the pack directory that the manifest
// does not list. It returns one *FileError per problem, sorted by path, and
// nil when the pack is intact.
func (p *Pack) Verify() []error {
	files := p.Manifest.Files
	results := make([]*FileError, len(files))
	// Hashing is I/O- and CPU-bound per file; a few workers make the CUDA
	// pack's gigabytes tolerable without swamping a small machine.
	workers := min(4, runtime.GOMAXPROCS(0), len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = p.verifyFile(files[i])
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()

	var errs []error
	for _, r := range results {
		if r != nil {
			errs = append(errs, r)
		}
	}
	errs = append(errs, p.extraFiles()...)
	sort.SliceStable(errs, func(i, j int) bool {
		return errs[i].(*FileError).Path < errs[j].(*FileError).Path
	})
	return errs
}

func (p *Pack) verifyFile(f File) *FileError {
	name := filepath.Join(p.Dir, filepath.FromSlash(f.Path))
	fi, err := os.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &FileError{Path: f.Path, Problem: "missing", ExpectedSHA256: f.SHA256, ExpectedSize: f.Size}
		}
		return &FileError{Path: f.Path, Problem: "cannot be read", Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &FileError{Path: f.Path, Problem: "not a regular file", ExpectedSHA256: f.SHA256}
	}
	size, sum, err := HashFile(name)
	if err != nil {
		return &FileError{Path: f.Path, Problem: "cannot be read", Err: err}
	}
	if size != f.Size || sum != f.SHA256 {
		return &FileError{Path: f.Path, Problem: "changed", ExpectedSHA256: f.SHA256, ActualSHA256: sum, ExpectedSize: f.Size, ActualSize: size}
	}
	return nil
}

// extraFiles lists non-directory entries the manifest does not name.
func (p *Pack) extraFiles() []error {
	listed := make(map[string]bool, len(p.Manifest.Files)+1)
	listed[ManifestName] = true
	for _, f := range p.Manifest.Files {
		listed[f.Path] = true
	}
	var errs []error
	err := filepath.WalkDir(p.Dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(p.Dir, name)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); !listed[rel] {
			errs = append(errs, &FileError{Path: rel, Problem: "not in the manifest"})
		}
		return nil
	})
	if err != nil {
		errs = append(errs, &FileError{Path: ".", Problem: "cannot be listed", Err: err})
	}
	return errs
}
