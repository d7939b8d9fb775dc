// Package native finds, downloads, verifies and installs mlxgo's native pack:
// MLX's shared library, everything it loads, and our C ABI shim, described
// by a manifest of sizes and sha256 digests. It also builds packs (for
// native/mkpack) and reports the host's CPU and GPU (for verify-native).
//
// The resolution order lives in exactly one function, Resolve. This package
// never loads a library itself (package mlx does, from Pack.ShimPath), never
// prints except download progress to a terminal, and never leaves a
// half-installed pack behind.
package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Environment variables that steer resolution.
const (
	EnvDir    = "MLXGO_NATIVE_DIR" // an explicit pack directory: used or fail, never a fallback
	EnvURL    = "MLXGO_NATIVE_URL" // where to download the pack instead of the release URL
	EnvDevice = "MLXGO_DEVICE"     // "cpu" or "gpu" forces the variant's device
)

// BesideExecutableDir is the directory name looked for next to the mlxgo
// binary (after resolving symlinks): a distribution can ship
// `mlxgo` and `mlxgo-native/` side by side and need no download or cache.
const BesideExecutableDir = "mlxgo-native"

// ErrNoPack is returned when no pack was found and downloading was not allowed.
var ErrNoPack = errors.New("no native pack found")

// Options adjusts Resolve and Install. The zero value does what a user's
// mlxgo does; tests fill in the rest.
type Options struct {
	Getenv     func(string) string // nil: os.Getenv
	Executable string              // the mlxgo binary; "": os.Executable()
	CacheDir   string              // the mlxgo cache root holding native-<version>-<variant>/; "": the user cache
	Host       *Host               // nil: CurrentHost()

	NoDownload bool   // stop after the cache instead of downloading
	Variant    string // a variant name instead of ChooseVariant's pick (mkpack install)

	// URL overrides MLXGO_NATIVE_URL and the release URL. ExpectedSHA256 and
	// ExpectedSize override the digest baked into the binary; both or neither.
	URL            string
	ExpectedSHA256 string
	ExpectedSize   int64

	StallTimeout time.Duration // no bytes for this long aborts a download; 0: DefaultStallTimeout
	HTTPClient   *http.Client  // nil: http.DefaultClient
	Progress     io.Writer     // nil: stderr when it is a terminal; io.Discard silences it

	// Replace makes Install replace a valid installed pack instead of keeping it
	// (`make native-install` after rebuilding the pack).
	Replace bool
}

func (o *Options) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

func (o *Options) host() Host {
	if o.Host != nil {
		return *o.Host
	}
	return CurrentHost()
}

// Resolve finds the native pack this binary should load, in the order of
// DESIGN.md §2: MLXGO_NATIVE_DIR (explicit: an unusable pack there is an
// error, with no fallback), then BesideExecutableDir next to the executable
// (likewise: a pack placed there on purpose is never silently skipped), then
// the user cache, then a download into the cache (unless opts.NoDownload).
// A freshly downloaded pack has had every file's sha256 verified; packs found
// on disk get the cheap check of Open (use Verify for the full one).
func Resolve(ctx context.Context, opts Options) (*Pack, error) {
	host := opts.host()
	device := opts.getenv(EnvDevice)

	if dir := opts.getenv(EnvDir); dir != "" {
		p, err := openFor(dir, host, device)
		if err != nil {
			return nil, fmt.Errorf("cannot use %s=%s: %w", EnvDir, dir, err)
		}
		p.Source = SourceEnv
		return p, nil
	}

	if dir, ok := besideExecutable(opts.Executable); ok {
		p, err := openFor(dir, host, device)
		if err != nil {
			return nil, fmt.Errorf("cannot use the native pack beside the executable (%s): %w (remove it to use the cache)", dir, err)
		}
		p.Source = SourceBesideExecutable
		return p, nil
	}

	v, err := opts.variant(host, device)
	if err != nil {
		return nil, err
	}
	root, err := opts.cacheRoot(host.OS)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, cacheDirName(v))
	if device == "" && opts.Variant == "" && v.MinNVIDIADriver > 0 && !opts.canGet(v, dir) {
		// Auto mode picks the CUDA pack only when it is there or can be
		// downloaded; otherwise the GPU host runs the CPU pack.
		if v, err = ChooseVariant(host, DeviceCPU); err != nil {
			return nil, err
		}
		dir = filepath.Join(root, cacheDirName(v))
	}
	p, cacheErr := openFor(dir, host, device)
	if cacheErr == nil {
		p.Source = SourceCache
		return p, nil
	}
	if opts.NoDownload {
		if errors.Is(cacheErr, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: looked in %s, beside the executable and %s (run `make native-install`, or allow the download)", ErrNoPack, EnvDir, dir)
		}
		return nil, fmt.Errorf("%w: the cached pack is unusable: %w", ErrNoPack, cacheErr)
	}
	opts.Variant = v.Name
	return Install(ctx, opts)
}

// canGet reports whether v's pack is installed in dir or can be downloaded
// (a URL is given, or a release digest is baked into this binary).
func (o *Options) canGet(v Variant, dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		return true
	}
	if o.NoDownload {
		return false
	}
	if o.URL != "" || o.getenv(EnvURL) != "" {
		return true
	}
	_, ok := ReleaseDigest(PackVersion, v.Name)
	return ok
}

// openFor opens dir and checks it serves this binary on host.
func openFor(dir string, host Host, device string) (*Pack, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	p, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if err := p.checkFor(PackVersion, host.OS, host.Arch, device); err != nil {
		return nil, fmt.Errorf("native pack %s: %w", p.Dir, err)
	}
	return p, nil
}

// besideExecutable returns <dir of the resolved executable>/mlxgo-native if
// it exists.
func besideExecutable(exe string) (string, bool) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", false
		}
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	dir := filepath.Join(filepath.Dir(exe), BesideExecutableDir)
	if _, err := os.Stat(dir); err != nil {
		return "", false
	}
	return dir, true
}

// cacheDirName is the directory of one installed pack inside the cache root.
func cacheDirName(v Variant) string { return "native-" + PackVersion + "-" + v.Name }

// cacheRoot is $XDG_CACHE_HOME/mlxgo (~/.cache/mlxgo by default) on Linux
// and ~/Library/Caches/mlxgo on macOS, unless opts.CacheDir says otherwise.
func (o *Options) cacheRoot(goos string) (string, error) {
	if o.CacheDir != "" {
		return filepath.Abs(o.CacheDir)
	}
	home := o.getenv("HOME")
	if goos == "darwin" {
		if home == "" {
			return "", errors.New("cannot find the user cache: $HOME is not set")
		}
		return filepath.Join(home, "Library", "Caches", "mlxgo"), nil
	}
	// XDG says a relative XDG_CACHE_HOME is invalid and must be ignored.
	if x := o.getenv("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "mlxgo"), nil
	}
	if home == "" {
		return "", errors.New("cannot find the user cache: neither $XDG_CACHE_HOME nor $HOME is set")
	}
	return filepath.Join(home, ".cache", "mlxgo"), nil
}

// CacheDir is where Resolve looks for (and installs) the pack for variant v.
func CacheDir(opts Options, v Variant) (string, error) {
	goos := runtime.GOOS
	if opts.Host != nil {
		goos = opts.Host.OS
	}
	root, err := opts.cacheRoot(goos)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, cacheDirName(v)), nil
}
