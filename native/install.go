package native

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Digest is the expected identity of a pack tarball.
type Digest struct {
	SHA256 string // lowercase hex
	Size   int64  // bytes
}

// ReleaseDigest returns the digest baked into this binary for a release
// tarball (see release_digests.go for how it gets there).
func ReleaseDigest(packVersion, variant string) (Digest, bool) {
	d, ok := releaseDigests[packVersion+"/"+variant]
	return d, ok
}

// ReleaseDigests returns every baked digest, keyed "<pack version>/<variant>".
func ReleaseDigests() map[string]Digest {
	out := make(map[string]Digest, len(releaseDigests))
	for k, d := range releaseDigests {
		out[k] = d
	}
	return out
}

func (d Digest) validate() error {
	if b, err := hex.DecodeString(d.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(d.SHA256) != d.SHA256 {
		return fmt.Errorf("expected sha256 %q is not 64 lowercase hex digits", d.SHA256)
	}
	if d.Size <= 0 {
		return fmt.Errorf("expected size %d is not positive", d.Size)
	}
	return nil
}

// variant is opts.Variant's row if set, else the host's choice.
func (o *Options) variant(host Host, device string) (Variant, error) {
	if o.Variant == "" {
		return ChooseVariant(host, device)
	}
	v, ok := LookupVariant(o.Variant)
	switch {
	case !ok:
		return Variant{}, fmt.Errorf("cannot install native pack: unknown variant %q", o.Variant)
	case v.OS != host.OS || v.Arch != host.Arch:
		return Variant{}, fmt.Errorf("cannot install native pack: variant %s is for %s/%s, this is %s/%s", v.Name, v.OS, v.Arch, host.OS, host.Arch)
	}
	return v, nil
}

// source is where v's tarball comes from and what it must hash to.
func (o *Options) source(v Variant) (string, Digest, error) {
	url := o.URL
	if url == "" {
		url = o.getenv(EnvURL)
	}
	if url == "" {
		url = v.URL(PackVersion)
	}
	if o.ExpectedSHA256 != "" || o.ExpectedSize != 0 {
		d := Digest{SHA256: o.ExpectedSHA256, Size: o.ExpectedSize}
		if err := d.validate(); err != nil {
			return "", Digest{}, fmt.Errorf("cannot install native pack: %w", err)
		}
		return url, d, nil
	}
	d, ok := ReleaseDigest(PackVersion, v.Name)
	if !ok {
		// Downloading something we cannot verify is never an option.
		return "", Digest{}, fmt.Errorf("cannot download native pack %s: this mlxgo build has no sha256 for it baked in (build and install one with `make native-install`, or set %s to a pack directory)", v.TarballName(PackVersion), EnvDir)
	}
	return url, d, nil
}

// Install downloads the pack for this host (or opts.Variant) into the user
// cache: it streams the tarball to a temporary file while checking its size
// and sha256, extracts it into a temporary directory beside the target,
// checks every file against the manifest, and renames the directory into
// place. All of that happens under a lock file, so concurrent installers end
// with one good install: a later one finds the earlier one's pack and keeps
// it (unless opts.Replace). Every error path removes what it created.
func Install(ctx context.Context, opts Options) (*Pack, error) {
	host := opts.host()
	device := opts.getenv(EnvDevice)
	v, err := opts.variant(host, device)
	if err != nil {
		return nil, err
	}
	url, want, err := opts.source(v)
	if err != nil {
		return nil, err
	}
	root, err := opts.cacheRoot(host.OS)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the native pack cache: %w", err)
	}
	name := cacheDirName(v)
	target := filepath.Join(root, name)
	lock, err := lockFile(ctx, filepath.Join(root, "."+name+".lock"))
	if err != nil {
		return nil, fmt.Errorf("cannot install native pack: %w", err)
	}
	defer lock.unlock()
	// We hold the lock for this name, so any temporary left with it belongs
	// to an installer that died (killed, power loss): clear it away.
	removeStale(root, name)

	if !opts.Replace {
		if p, err := openFor(target, host, device); err == nil && p.Manifest.Variant == v.Name {
			p.Source = SourceCache
			return p, nil
		}
	}
	progress := opts.Progress
	if progress == nil {
		progress = stderrIfTerminal()
	} else if progress == io.Discard {
		progress = nil
	}
	spec := fetchSpec{URL: url, SHA256: want.SHA256, Size: want.Size, StallTimeout: opts.StallTimeout, Client: opts.HTTPClient, Progress: progress}
	return installLocked(ctx, root, target, v, host, spec)
}

func installLocked(ctx context.Context, root, target string, v Variant, host Host, spec fetchSpec) (p *Pack, err error) {
	base := filepath.Base(target)
	tmp, err := os.MkdirTemp(root, ".tmp-"+base+"-")
	if err != nil {
		return nil, fmt.Errorf("cannot install native pack: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	dl, err := os.CreateTemp(root, ".dl-"+base+"-")
	if err != nil {
		return nil, fmt.Errorf("cannot install native pack: %w", err)
	}
	defer func() {
		dl.Close()
		os.Remove(dl.Name())
	}()

	if err := fetch(ctx, dl, spec); err != nil {
		return nil, err
	}
	if _, err := dl.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("cannot install native pack: %w", err)
	}
	if err := extractTarGz(bufio.NewReaderSize(dl, 1<<20), tmp, defaultLimits); err != nil {
		return nil, err
	}
	p, err = Open(tmp)
	if err != nil {
		return nil, fmt.Errorf("downloaded native pack is not usable: %w", err)
	}
	if err := p.checkFor(PackVersion, host.OS, host.Arch, ""); err != nil {
		return nil, fmt.Errorf("downloaded native pack is not usable: %w", err)
	}
	if p.Manifest.Variant != v.Name {
		return nil, fmt.Errorf("downloaded native pack is variant %s, expected %s", p.Manifest.Variant, v.Name)
	}
	// The tarball's digest already matched, but the manifest is what later
	// checks rely on: a pack that disagrees with its own manifest is refused
	// before anything could dlopen it.
	if errs := p.Verify(); len(errs) > 0 {
		return nil, fmt.Errorf("downloaded native pack failed verification: %s", joinErrors(errs))
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("cannot install native pack: %w", err)
	}
	if err := replaceDir(root, tmp, target); err != nil {
		return nil, err
	}
	p.Dir, p.Source = target, SourceDownload
	return p, nil
}

// replaceDir renames tmp to target. An existing target (an outdated or
// broken install) is first moved aside, then removed: readers without the
// lock see the old pack, briefly nothing, or the new pack — never a mixture.
func replaceDir(root, tmp, target string) error {
	var old string
	if _, err := os.Lstat(target); err == nil {
		o, err := os.MkdirTemp(root, ".old-"+filepath.Base(target)+"-")
		if err != nil {
			return fmt.Errorf("cannot install native pack: %w", err)
		}
		old = filepath.Join(o, "pack")
		if err := os.Rename(target, old); err != nil {
			os.RemoveAll(o)
			return fmt.Errorf("cannot replace the installed native pack %s: %w", target, err)
		}
		defer os.RemoveAll(o)
	}
	if err := os.Rename(tmp, target); err != nil {
		if old != "" {
			os.Rename(old, target) // put the previous install back
		}
		return fmt.Errorf("cannot install native pack into %s: %w", target, err)
	}
	return nil
}

// removeStale deletes temporaries of a previous installer of this pack.
func removeStale(root, base string) {
	for _, prefix := range []string{".tmp-", ".dl-", ".old-"} {
		matches, _ := filepath.Glob(filepath.Join(root, prefix+base+"-*"))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
}

// joinErrors makes one line of several errors: diagnostics stay one line each.
func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}
