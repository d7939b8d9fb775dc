package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/models"
)

// adapterFlags are the LoRA adapter flags of generate (--adapter-path DIR,
// one, as mlx_lm.generate) and serve (--adapter NAME=DIR and --adapter-path
// DIR, repeatable: a name is the directory's base name), and
// --fuse-adapter (one adapter, folded into the weights as mlx_lm.fuse
// does).
type adapterFlags struct {
	specs []models.Adapter
	fuse  bool
	err   error // the first bad flag value, reported by check
}

const adapterUsageGenerate = `	--adapter-path DIR        apply the LoRA adapter in DIR (mlx-lm's adapter_config.json +
	                          adapters.safetensors), unfused, as mlx_lm.generate does
	--fuse-adapter            fold the adapter into the weights as mlx_lm.fuse does
	                          (quantized weights are quantized again)
`

const adapterUsageServe = `	--adapter NAME=DIR        load the LoRA adapter in DIR (mlx-lm's format) as NAME;
	                          repeatable. A request chooses it by "adapters": "NAME"
	                          or "model": "ID:NAME" (GET /v1/models lists them);
	                          requests of different adapters batch together
	--adapter-path DIR        the same, named by DIR's base name
	--fuse-adapter            fold the one adapter into the weights (mlx_lm.fuse):
	                          every request runs it
`

func (a *adapterFlags) register(fs *flag.FlagSet, serve bool) {
	add := func(name, dir string) {
		if dir == "" && a.err == nil {
			a.err = usagef("--adapter-path: the adapter directory is empty")
		}
		a.specs = append(a.specs, models.Adapter{Name: name, Path: dir})
	}
	fs.Func("adapter-path", "", func(dir string) error {
		add(filepath.Base(filepath.Clean(dir)), dir)
		return nil
	})
	if serve {
		fs.Func("adapter", "", func(v string) error {
			name, dir, ok := strings.Cut(v, "=")
			if !ok && a.err == nil {
				a.err = usagef("--adapter %q: want NAME=DIR", v)
			}
			add(name, dir)
			return nil
		})
	}
	fs.BoolVar(&a.fuse, "fuse-adapter", false, "")
}

// check refuses what cannot be loaded: bad names, a name twice, more than
// one adapter for generate or to fuse.
func (a *adapterFlags) check(serve bool) error {
	if a.err != nil {
		return a.err
	}
	switch {
	case a.fuse && len(a.specs) != 1:
		return usagef("--fuse-adapter fuses one adapter; %d given", len(a.specs))
	case !serve && len(a.specs) > 1:
		return usagef("--adapter-path is given once: generate applies one adapter")
	}
	var seen []string
	for _, s := range a.specs {
		if s.Name == "" || s.Name == "." || strings.ContainsAny(s.Name, ":/ \t\n") {
			return usagef("adapter name %q: want a name without ':', '/' or spaces (--adapter NAME=DIR)", s.Name)
		}
		if slices.Contains(seen, s.Name) {
			return usagef("two adapters are named %s: name them with --adapter NAME=DIR", s.Name)
		}
		seen = append(seen, s.Name)
	}
	return nil
}

// options are the adapters to load with the model.
func (a *adapterFlags) options() models.LoadOptions {
	return models.LoadOptions{Adapters: a.specs, FuseAdapter: a.fuse}
}

// view is the model generate runs: the adapter's view of an unfused model.
func (a *adapterFlags) view(m models.Model) (models.Model, error) {
	ad, ok := m.(models.Adapted)
	if !ok || len(a.specs) == 0 {
		return m, nil
	}
	return ad.WithAdapter(a.specs[0].Name)
}

// describeAdapters is --verbose's line for the adapters loaded.
func describeAdapters(w io.Writer, info models.Info) {
	for _, ad := range info.Adapters {
		how := "unfused"
		if ad.Fused {
			how = "fused"
		}
		fmt.Fprintf(w, "adapter:     %s (%s, %s, %s)\n", ad.Name, ad.Path, ad.Type, how)
	}
}

// logAdapters says on stderr which model id serves each adapter.
func logAdapters(w io.Writer, info models.Info, id string) {
	for _, ad := range info.Adapters {
		if ad.Fused {
			fmt.Fprintf(w, "mlxgo: adapter %s (%s, %s) fused into %s\n", ad.Name, ad.Path, ad.Type, id)
			continue
		}
		fmt.Fprintf(w, "mlxgo: adapter %s (%s, %s) served as model %q\n", ad.Name, ad.Path, ad.Type, id+":"+ad.Name)
	}
}
