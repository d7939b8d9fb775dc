// Command mkpack builds, bakes, installs and verifies mlxgo native packs. It
// is a build tool run by the Makefile (`go run ./native/mkpack ...`), not
// part of the mlxgo binary.
//
//	mkpack build   -variant V -wheel DIR -shim FILE -out DIR   pack dir OUT/pack/V and OUT/<tarball>
//	mkpack bake    -variant V -out DIR [-o FILE]               print the tarball's sha256 and size, write release_digests.go
//	mkpack install -variant V -out DIR [-cache DIR]            install the tarball into the user cache
//	mkpack verify  DIR                                         check every file of a pack against its manifest
//	mkpack host                                                print the CPU, GPU and chosen variant as JSON
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mlxgo/mlxgo/native"
)

const usage = `Usage: mkpack <command> [flags]

Commands:
	build    assemble the pack directory and its reproducible tarball
	bake     print the tarball's sha256 and size and write them into native/release_digests.go
	install  install the tarball into the user cache, verified, as a download would
	verify   check every file of a pack directory against its manifest
	host     print this machine's CPU, NVIDIA driver and the variant mlxgo would choose
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkpack: error: %s\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command")
	}
	fs := flag.NewFlagSet("mkpack "+args[0], flag.ContinueOnError)
	variant := fs.String("variant", "linux-amd64-cpu", "pack variant (a row of native.Variants)")
	out := fs.String("out", ".cache/native", "directory holding pack/<variant>/ and the tarball")
	wheel := fs.String("wheel", "", "unpacked wheel directory (build)")
	shim := fs.String("shim", "", "compiled shim libmlxgo.so (build)")
	goFile := fs.String("o", "native/release_digests.go", "generated Go file (bake)")
	cache := fs.String("cache", "", "cache root instead of the user cache (install)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	v, ok := native.LookupVariant(*variant)
	if !ok {
		return fmt.Errorf("unknown variant %q", *variant)
	}
	tarball := filepath.Join(*out, v.TarballName(native.PackVersion))
	switch args[0] {
	case "build":
		return build(v, *wheel, *shim, *out, tarball)
	case "bake":
		return bake(v, tarball, *goFile)
	case "install":
		return install(ctx, v, tarball, *cache)
	case "host":
		return host()
	case "verify":
		if fs.NArg() != 1 {
			return errors.New("verify needs one pack directory")
		}
		return verify(fs.Arg(0))
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func build(v native.Variant, wheel, shim, out, tarball string) error {
	if wheel == "" || shim == "" {
		return errors.New("build needs -wheel and -shim")
	}
	dir := filepath.Join(out, "pack", v.Name)
	m, err := native.BuildPack(native.BuildSpec{Variant: v, WheelDir: wheel, Shim: shim, OutDir: dir})
	if err != nil {
		return err
	}
	if err := native.WriteTarballFile(tarball, dir); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mkpack: built %s (%d files) and %s\n", dir, len(m.Files), tarball)
	return nil
}

// bake prints the digest (stdout: data) and rewrites the generated file,
// keeping other variants' digests for this pack version.
func bake(v native.Variant, tarball, goFile string) error {
	size, sum, err := native.HashFile(tarball)
	if err != nil {
		return fmt.Errorf("cannot read the pack tarball (run make native first): %w", err)
	}
	fmt.Printf("%s  %d  %s\n", sum, size, tarball)
	digests := native.ReleaseDigests()
	for k := range digests {
		if !strings.HasPrefix(k, native.PackVersion+"/") {
			delete(digests, k) // keys of other pack versions can never match again
		}
	}
	digests[native.PackVersion+"/"+v.Name] = native.Digest{SHA256: sum, Size: size}
	src, err := renderDigests(goFile, digests)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(goFile); err == nil && string(old) == string(src) {
		return nil
	}
	return os.WriteFile(goFile, src, 0o644)
}

// renderDigests keeps the hand-written comment of the existing file (up to
// the map) and regenerates the map itself.
func renderDigests(goFile string, digests map[string]native.Digest) ([]byte, error) {
	old, err := os.ReadFile(goFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", goFile, err)
	}
	head, _, ok := strings.Cut(string(old), "var releaseDigests")
	if !ok {
		return nil, fmt.Errorf("cannot update %s: no releaseDigests variable in it", goFile)
	}
	keys := make([]string, 0, len(digests))
	for k := range digests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("var releaseDigests = map[string]Digest{\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q: {SHA256: %q, Size: %d},\n", k, digests[k].SHA256, digests[k].Size)
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("cannot format %s: %w", goFile, err)
	}
	return src, nil
}

// install feeds the local tarball through native.Install, the code path a
// download takes (size, sha256, safe extraction, per-file verification,
// atomic rename under the lock). The expected digest is the tarball's own:
// we just built it, so trusting it here is trusting ourselves.
func install(ctx context.Context, v native.Variant, tarball, cache string) error {
	abs, err := filepath.Abs(tarball)
	if err != nil {
		return err
	}
	size, sum, err := native.HashFile(abs)
	if err != nil {
		return fmt.Errorf("cannot read the pack tarball (run make native first): %w", err)
	}
	p, err := native.Install(ctx, native.Options{
		CacheDir: cache, Variant: v.Name, Replace: true,
		URL:            (&url.URL{Scheme: "file", Path: abs}).String(),
		ExpectedSHA256: sum, ExpectedSize: size,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mkpack: installed %s into %s\n", filepath.Base(abs), p.Dir)
	return nil
}

// host shows what variant choice sees (MLXGO_DEVICE included), as JSON on stdout.
func host() error {
	h := native.CurrentHost()
	out := map[string]any{"os": h.OS, "arch": h.Arch, "cpu": native.CPUFeatures(), "gpu": h.GPU}
	if v, err := native.ChooseVariant(h, os.Getenv(native.EnvDevice)); err != nil {
		out["variant_error"] = err.Error()
	} else {
		out["variant"] = v.Name
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func verify(dir string) error {
	p, err := native.Open(dir)
	if err != nil {
		return err
	}
	if errs := p.Verify(); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "mkpack: %s\n", e)
		}
		return fmt.Errorf("%d problems in %s", len(errs), p.Dir)
	}
	fmt.Fprintf(os.Stderr, "mkpack: %s: all %d files match the manifest\n", p.Dir, len(p.Manifest.Files))
	return nil
}
