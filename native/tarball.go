package native

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// tarballTime is every entry's modification time. A fixed instant (not the
// build time, not SOURCE_DATE_EPOCH) keeps the tarball a function of the
// pack's contents alone.
var tarballTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteTarball writes the pack directory dir as a reproducible gzip'd tar:
// entries sorted by path, directories before their contents, fixed mtimes,
// uid/gid 0 with no user or group names, modes reduced to 0755/0644, and a
// gzip header with no name and no time. The same directory gives the same
// bytes for a given Go toolchain (compress/flate's output is stable within
// a Go release; go.mod pins the language version, CI pins the toolchain).
func WriteTarball(w io.Writer, dir string) error {
	type entry struct {
		rel string
		dir bool
		exe bool
	}
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file: packs hold plain files only", rel)
		}
		entries = append(entries, entry{rel: filepath.ToSlash(rel), dir: d.IsDir(), exe: fi.Mode()&0o111 != 0})
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	// A parent's path is a prefix of its children's, so plain string order
	// puts every directory before what it holds.
	sort.Slice(entries, func(i, j int) bool { return entries[i].rel < entries[j].rel })

	// BestCompression saves under 1% on these libraries and takes much longer.
	gz, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.rel, ModTime: tarballTime, Mode: 0o644, Typeflag: tar.TypeReg}
		var size int64
		if e.dir {
			hdr.Name, hdr.Mode, hdr.Typeflag = e.rel+"/", 0o755, tar.TypeDir
		} else {
			fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(e.rel)))
			if err != nil {
				return fmt.Errorf("cannot write pack tarball: %w", err)
			}
			size = fi.Size()
			hdr.Size = size
			if e.exe {
				hdr.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("cannot write pack tarball: %s: %w", e.rel, err)
		}
		if !e.dir {
			if err := copyInto(tw, filepath.Join(dir, filepath.FromSlash(e.rel)), size); err != nil {
				return fmt.Errorf("cannot write pack tarball: %s: %w", e.rel, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	return nil
}

// copyInto copies exactly size bytes of a file; a file that changed size
// since it was listed would corrupt the tar stream, so that is an error.
func copyInto(w io.Writer, name string, size int64) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size+1))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("changed size while being archived (%d bytes, expected %d)", n, size)
	}
	return nil
}

// WriteTarballFile writes the tarball of dir to name atomically (a
// temporary file renamed into place).
func WriteTarballFile(name, dir string) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".tmp-"+filepath.Base(name)+"-")
	if err != nil {
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := WriteTarball(tmp, dir); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("cannot write pack tarball: %w", err)
	}
	return nil
}
