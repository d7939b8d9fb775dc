package native

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Limits on what extraction will write. The tarball's sha256 is checked
// before extraction, so these only matter for a pack whose expected digest
// was itself wrong — but extraction must be safe on any input.
const (
	maxPackBytes   = 16 << 30 // the CUDA pack (cuBLAS, cuDNN, NVRTC, headers) is a few GiB
	maxPackEntries = 100000
)

// extractLimits bounds an extraction; tests and fuzzing use small ones.
type extractLimits struct {
	Bytes   int64
	Entries int
}

var defaultLimits = extractLimits{Bytes: maxPackBytes, Entries: maxPackEntries}

// extractTarGz unpacks a gzip-compressed tar into dir, an existing empty
// directory. Only regular files and directories are accepted: absolute
// paths, "..", links of any kind, devices and FIFOs are refused, because a
// pack never needs them and each is a way out of dir. Writes go through
// os.Root, so even a bug here cannot create a file outside dir.
// On error, dir may hold partial output; the caller removes it.
func extractTarGz(r io.Reader, dir string, lim extractLimits) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("cannot extract native pack: not gzip data: %w", err)
	}
	defer gz.Close()
	gz.Multistream(false)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("cannot extract native pack: %w", err)
	}
	defer root.Close()

	tr := tar.NewReader(gz)
	var total int64
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("cannot extract native pack: bad tar data: %w", err)
		}
		if entries >= lim.Entries {
			return fmt.Errorf("cannot extract native pack: more than %d entries", lim.Entries)
		}
		name, err := entryName(hdr)
		if err != nil {
			return fmt.Errorf("cannot extract native pack: %w", err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("cannot extract native pack: directory %q: %w", name, err)
			}
		case tar.TypeReg:
			if hdr.Size < 0 || hdr.Size > lim.Bytes-total {
				return fmt.Errorf("cannot extract native pack: %q would take it past %d bytes", name, lim.Bytes)
			}
			total += hdr.Size
			if err := writeEntry(root, name, hdr, tr); err != nil {
				return fmt.Errorf("cannot extract native pack: %w", err)
			}
		case tar.TypeSymlink, tar.TypeLink:
			// Decided: no links at all. The wheel's libraries are plain
			// files, and a link is the classic escape from the target dir.
			return fmt.Errorf("cannot extract native pack: refusing link %q -> %q: packs hold plain files only", hdr.Name, hdr.Linkname)
		default:
			return fmt.Errorf("cannot extract native pack: refusing %q: entry type %q is not a file or directory", hdr.Name, string(rune(hdr.Typeflag)))
		}
	}
	// Reading the gzip stream to its end makes it check its CRC and length,
	// so a corrupted tail is noticed even though tar stopped before it.
	if _, err := io.Copy(io.Discard, io.LimitReader(gz, 1<<20)); err != nil {
		return fmt.Errorf("cannot extract native pack: bad gzip data: %w", err)
	}
	return nil
}

// entryName checks a tar entry's name and returns it as a clean relative path.
func entryName(hdr *tar.Header) (string, error) {
	name := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if err := checkRelPath(name); err != nil {
		return "", fmt.Errorf("refusing entry %q: %w", hdr.Name, err)
	}
	// Catch ".." anywhere, not only in front: Clean already removed inner
	// ones, so any left are leading, but say so explicitly for readers.
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("refusing entry %q: path leaves the pack", hdr.Name)
		}
	}
	return name, nil
}

// writeEntry creates one regular file; O_EXCL refuses duplicates, which
// could otherwise replace a file that was already checked.
func writeEntry(root *os.Root, name string, hdr *tar.Header, r io.Reader) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("directory for %q: %w", name, err)
		}
	}
	perm := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("file %q: %w", name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file %q: %w", name, err)
	}
	if n != hdr.Size {
		return fmt.Errorf("file %q: %w after %d of %d bytes", name, io.ErrUnexpectedEOF, n, hdr.Size)
	}
	return nil
}
