package native

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ManifestName is the manifest's file name at the root of every pack.
const ManifestName = "manifest.json"

// manifestFormat is the schema version of manifest.json; a reader refuses a
// format it does not know rather than guessing at its fields.
const manifestFormat = 1

// maxManifestSize bounds what we read and parse: a real manifest is a few
// KiB (the CUDA pack's, with its headers, well under 1 MiB).
const maxManifestSize = 8 << 20

// Manifest describes a pack: what it is and, for every file, its size and
// sha256. It is the single source of truth Verify checks a pack against.
type Manifest struct {
	Format      int    `json:"format"`
	PackVersion string `json:"pack_version"`
	MLXVersion  string `json:"mlx_version"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Variant     string `json:"variant"`
	Library     string `json:"library"` // libmlx.so, relative to the pack root
	Shim        string `json:"shim"`    // our C ABI shim, relative to the pack root
	Files       []File `json:"files"`   // sorted by Path; manifest.json itself is not listed
}

// File is one file of a pack.
type File struct {
	Path   string `json:"path"` // slash-separated, relative to the pack root
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lowercase hex
}

// ParseManifest decodes and validates manifest.json. It never trusts a path
// in it: every one must be a clean relative path inside the pack.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestSize {
		return nil, fmt.Errorf("cannot parse %s: %d bytes is more than the %d allowed", ManifestName, len(data), maxManifestSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", ManifestName, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("cannot parse %s: trailing data after the JSON object", ManifestName)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("invalid %s: %w", ManifestName, err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	if m.Format != manifestFormat {
		return fmt.Errorf("format %d, this mlxgo reads format %d", m.Format, manifestFormat)
	}
	for name, v := range map[string]string{
		"pack_version": m.PackVersion, "mlx_version": m.MLXVersion, "os": m.OS,
		"arch": m.Arch, "variant": m.Variant, "library": m.Library, "shim": m.Shim,
	} {
		if v == "" {
			return fmt.Errorf("%s is empty", name)
		}
	}
	if len(m.Files) == 0 {
		return errors.New("no files listed")
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if err := checkRelPath(f.Path); err != nil {
			return fmt.Errorf("file %d: %w", i, err)
		}
		if f.Path == ManifestName {
			return fmt.Errorf("file %d: %s cannot list itself", i, ManifestName)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q is listed twice", f.Path)
		}
		seen[f.Path] = true
		if f.Size < 0 {
			return fmt.Errorf("file %q: negative size %d", f.Path, f.Size)
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(f.SHA256) != f.SHA256 {
			return fmt.Errorf("file %q: sha256 %q is not 64 lowercase hex digits", f.Path, f.SHA256)
		}
	}
	// A file listed under another file's path as a directory cannot exist.
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("file %q is inside file %q", p, d)
			}
		}
	}
	if !seen[m.Library] {
		return fmt.Errorf("library %q is not among the files", m.Library)
	}
	if !seen[m.Shim] {
		return fmt.Errorf("shim %q is not among the files", m.Shim)
	}
	return nil
}

// checkRelPath accepts only clean, slash-separated, relative paths that stay
// inside the pack: no absolute paths, no "..", no backslashes or NULs that
// another OS or a C API could read differently.
func checkRelPath(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("empty path")
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("path %q has a backslash or NUL", p)
	case path.IsAbs(p) || filepath.IsAbs(p):
		return fmt.Errorf("path %q is absolute", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean", p)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("path %q leaves the pack", p)
	}
	return nil
}

// Marshal encodes the manifest deterministically (sorted files, fixed
// indentation), so that rebuilding a pack gives identical bytes.
func (m *Manifest) Marshal() ([]byte, error) {
	c := *m
	c.Files = append([]File(nil), m.Files...)
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Path < c.Files[j].Path })
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("cannot encode %s: %w", ManifestName, err)
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cannot encode %s: %w", ManifestName, err)
	}
	return append(b, '\n'), nil
}

// File returns the manifest entry for a relative path.
func (m *Manifest) File(rel string) (File, bool) {
	for _, f := range m.Files {
		if f.Path == rel {
			return f, true
		}
	}
	return File{}, false
}

// HashFile returns a file's size and lowercase hex sha256.
func HashFile(name string) (int64, string, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("cannot read %s: %w", name, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// ListFiles hashes every regular file under dir except manifest.json, in
// sorted order. Anything that is not a regular file or a directory (links,
// devices) is an error: packs hold plain files only.
func ListFiles(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (%s)", rel, d.Type())
		case rel == ManifestName:
			return nil
		}
		size, sum, err := HashFile(p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: rel, Size: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list pack files in %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
