package native

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Paths inside every pack. The shim sits beside libmlx.so so that its
// RUNPATH $ORIGIN finds it, and libmlx.so keeps the wheel's place so that its
// own RPATH ($ORIGIN/../../mlx_cpu.libs on the CPU wheel) still resolves.
const (
	packLibrary = "mlx/lib/libmlx.so"
	packShim    = "mlx/lib/libmlxgo.so"
	packLicense = "licenses"
)

// BuildSpec says what a pack is built from.
type BuildSpec struct {
	Variant  Variant
	WheelDir string // the unpacked wheel (Variant.Wheel, version MLXVersion)
	Shim     string // the compiled shim, libmlxgo.so
	OutDir   string // the pack directory to create; replaced if it exists
}

// BuildPack assembles a pack directory: the variant's files from the wheel
// in the wheel's layout, the shim, licence files, and manifest.json. It
// builds into a temporary sibling and renames it into place, so OutDir is
// either the old pack or the complete new one.
func BuildPack(spec BuildSpec) (*Manifest, error) {
	v := spec.Variant
	distInfo, err := checkWheel(spec.WheelDir, v.Wheel)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(spec.OutDir), 0o755); err != nil {
		return nil, fmt.Errorf("cannot build native pack: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(spec.OutDir), ".build-"+filepath.Base(spec.OutDir)+"-")
	if err != nil {
		return nil, fmt.Errorf("cannot build native pack: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("cannot build native pack: %w", err)
	}

	for _, rel := range v.WheelPaths {
		if err := copyTree(filepath.Join(spec.WheelDir, filepath.FromSlash(rel)), filepath.Join(tmp, filepath.FromSlash(rel))); err != nil {
			return nil, fmt.Errorf("cannot build native pack: wheel path %s: %w", rel, err)
		}
	}
	if err := copyFile(spec.Shim, filepath.Join(tmp, filepath.FromSlash(packShim))); err != nil {
		return nil, fmt.Errorf("cannot build native pack: shim: %w", err)
	}
	if err := addLicenses(tmp, distInfo); err != nil {
		return nil, fmt.Errorf("cannot build native pack: %w", err)
	}
	files, err := ListFiles(tmp)
	if err != nil {
		return nil, err
	}
	m := &Manifest{
		Format: manifestFormat, PackVersion: PackVersion, MLXVersion: MLXVersion,
		OS: v.OS, Arch: v.Arch, Variant: v.Name, Library: packLibrary, Shim: packShim, Files: files,
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, ManifestName), data, 0o644); err != nil {
		return nil, fmt.Errorf("cannot build native pack: %w", err)
	}
	if err := os.RemoveAll(spec.OutDir); err != nil {
		return nil, fmt.Errorf("cannot replace %s: %w", spec.OutDir, err)
	}
	if err := os.Rename(tmp, spec.OutDir); err != nil {
		return nil, fmt.Errorf("cannot build native pack: %w", err)
	}
	return m, nil
}

// checkWheel confirms the unpacked wheel is the pinned one (its dist-info
// METADATA names the package and MLXVersion) and returns its dist-info dir.
func checkWheel(dir, wheel string) (string, error) {
	distInfo := filepath.Join(dir, strings.ReplaceAll(wheel, "-", "_")+"-"+MLXVersion+".dist-info")
	f, err := os.Open(filepath.Join(distInfo, "METADATA"))
	if err != nil {
		return "", fmt.Errorf("cannot build native pack: %s is not an unpacked %s %s wheel: %w", dir, wheel, MLXVersion, err)
	}
	defer f.Close()
	var name, version string
	sc := bufio.NewScanner(f)
	for sc.Scan() && sc.Text() != "" { // the headers end at the first blank line
		if k, val, ok := strings.Cut(sc.Text(), ": "); ok {
			switch k {
			case "Name":
				name = val
			case "Version":
				version = val
			}
		}
	}
	if name != wheel || version != MLXVersion {
		return "", fmt.Errorf("cannot build native pack: wheel in %s is %s %s, expected %s %s", dir, name, version, wheel, MLXVersion)
	}
	return distInfo, nil
}

// copyTree copies a file, or a directory of plain files, keeping only the
// executable bit of each file's mode so that the pack does not depend on
// the builder's umask.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return copyFile(src, dst)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: packs hold plain files only", src)
	}
	perm := os.FileMode(0o644)
	if fi.Mode()&0o111 != 0 {
		perm = 0o755
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // the umask may have narrowed it
}

// spdxByPackage names the licences of the libraries auditwheel bundles into
// the Linux wheels; the wheel ships their names (in its SBOM) but not their
// licence texts, so the pack says which licence each is under.
var spdxByPackage = map[string]string{
	"libblas3":     "BSD-3-Clause (reference BLAS, Netlib)",
	"liblapack3":   "BSD-3-Clause (reference LAPACK, Netlib)",
	"libgfortran5": "GPL-3.0-or-later WITH GCC-exception-3.1",
	"libquadmath0": "LGPL-2.1-or-later",
}

// addLicenses writes licenses/: MLX's LICENSE, the wheel's SBOM when it has
// one, and THIRD-PARTY.txt listing each bundled library and its licence.
func addLicenses(packDir, distInfo string) error {
	dir := filepath.Join(packDir, packLicense)
	if err := copyFile(filepath.Join(distInfo, "licenses", "LICENSE"), filepath.Join(dir, "MLX-LICENSE")); err != nil {
		return fmt.Errorf("MLX licence: %w", err)
	}
	sbom := filepath.Join(distInfo, "sboms", "auditwheel.cdx.json")
	data, err := os.ReadFile(sbom)
	if os.IsNotExist(err) {
		return nil // the Metal wheel bundles nothing
	}
	if err != nil {
		return err
	}
	if err := copyFile(sbom, filepath.Join(dir, "auditwheel.cdx.json")); err != nil {
		return err
	}
	var doc struct {
		Metadata struct {
			Component struct{ Name string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version, Purl string } `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("cannot parse the wheel's SBOM: %w", err)
	}
	var b strings.Builder
	b.WriteString("Libraries bundled into the MLX wheel by auditwheel (see auditwheel.cdx.json).\n")
	b.WriteString("Their full licence texts are published by the upstream projects named below.\n\n")
	var lines []string
	for _, c := range doc.Components {
		if c.Name == doc.Metadata.Component.Name {
			continue
		}
		lic := spdxByPackage[c.Name]
		if lic == "" {
			lic = "unknown: see " + c.Purl
		}
		lines = append(lines, fmt.Sprintf("%s %s\n  %s\n  licence: %s\n", c.Name, c.Version, c.Purl, lic))
	}
	sort.Strings(lines)
	b.WriteString(strings.Join(lines, "\n"))
	return os.WriteFile(filepath.Join(dir, "THIRD-PARTY.txt"), []byte(b.String()), 0o644)
}
