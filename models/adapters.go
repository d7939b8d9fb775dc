package models

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/lora"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Adapter names a LoRA adapter directory in mlx-lm's format
// (adapter_config.json + adapters.safetensors) to load with a model.
type Adapter struct {
	Name string // what requests call it
	Path string
}

// AdapterInfo describes a loaded adapter.
type AdapterInfo struct {
	Name  string
	Path  string
	Type  string // "lora" or "dora"
	Fused bool   // folded into the weights (LoadOptions.FuseAdapter)
	// Fingerprint is the adapter's artifact fingerprint (its two files).
	Fingerprint func() (string, error)
}

// Adapted is a model loaded with unfused LoRA adapters: one set of base
// weights, each adapted linear layer holding every adapter's update. A view
// (WithAdapter) is the model as one adapter (or none) makes it; the caches
// its NewCaches makes carry that adapter, one entry after the layers'
// caches, so that whatever holds the caches -- a row of a decode batch, a
// prompt cache entry -- holds its adapter: Forward and ForwardRows apply to
// each sequence the adapter of its caches, and rows of one batch may each
// have their own.
// Views share the weights: Close the model Load returned, once.
type Adapted interface {
	DecoderModel
	// WithAdapter is the view of adapter name ("": no adapter).
	WithAdapter(name string) (Adapted, error)
	// Adapter is this view's adapter ("": none).
	Adapter() string
}

// ErrUnknownAdapter is wrapped by WithAdapter's error for a name no
// loaded adapter has.
var ErrUnknownAdapter = errors.New("unknown adapter")

// openAdapters opens opts' adapters for a model of layers layers and gives
// them to w. Their files stay mapped until close is called (after build).
func openAdapters(w *nn.Weights, opts LoadOptions, layers int) (set *nn.Adapters, infos []AdapterInfo, close func(), err error) {
	close = func() {}
	if len(opts.Adapters) == 0 {
		if opts.FuseAdapter {
			return nil, nil, close, errors.New("cannot fuse an adapter: no adapter given")
		}
		return nil, nil, close, nil
	}
	var opened []*lora.Adapter
	close = func() {
		for _, a := range opened {
			a.Close()
		}
	}
	var srcs []nn.AdapterSource
	for _, spec := range opts.Adapters {
		if spec.Name == "" || strings.ContainsAny(spec.Name, ":/ \t\n") {
			close()
			return nil, nil, func() {}, fmt.Errorf("cannot load adapter %q from %s: a name must be non-empty, without ':', '/' or spaces", spec.Name, spec.Path)
		}
		if slices.ContainsFunc(infos, func(i AdapterInfo) bool { return i.Name == spec.Name }) {
			close()
			return nil, nil, func() {}, fmt.Errorf("cannot load adapter %s twice: give each adapter its own name", spec.Name)
		}
		a, err := lora.Open(spec.Name, spec.Path)
		if err != nil {
			close()
			return nil, nil, func() {}, err
		}
		opened = append(opened, a)
		srcs = append(srcs, a.Source(layers))
		infos = append(infos, AdapterInfo{Name: spec.Name, Path: spec.Path, Type: a.Config.FineTuneType,
			Fused: opts.FuseAdapter, Fingerprint: a.Fingerprint})
	}
	set, err = w.SetAdapters(srcs, opts.FuseAdapter)
	if err != nil {
		close()
		return nil, nil, func() {}, err
	}
	return set, infos, close, nil
}

// adapt makes m, built with adapters, the model Load returns: fused, m
// itself; unfused, the view of no adapter.
func adapt(m *lm, set *nn.Adapters, infos []AdapterInfo) DecoderModel {
	m.info.Adapters = infos
	if set == nil || len(infos) > 0 && infos[0].Fused {
		return m
	}
	names := make([]string, len(infos))
	for i, a := range infos {
		names[i] = a.Name
	}
	return &adaptedLM{lm: m, set: set, names: names, adapter: -1}
}

// adaptedLM is Adapted: the model and the view's adapter (-1: none).
type adaptedLM struct {
	*lm
	set     *nn.Adapters
	names   []string
	adapter int
}

func (m *adaptedLM) WithAdapter(name string) (Adapted, error) {
	v := *m
	v.adapter = -1
	if name != "" {
		v.adapter = slices.Index(m.names, name)
		if v.adapter < 0 {
			return nil, fmt.Errorf("%w %q: the adapters loaded are %s", ErrUnknownAdapter, name, strings.Join(m.names, ", "))
		}
	}
	return &v, nil
}

func (m *adaptedLM) Adapter() string {
	if m.adapter < 0 {
		return ""
	}
	return m.names[m.adapter]
}

// adapterTag is the entry an adapted model's caches end with: it holds
// nothing and is never trimmed short, so every kv helper passes it by
// (MaybeQuantize, Trim, States), and names the adapter of the sequence.
type adapterTag struct{ adapter int }

func (*adapterTag) Offset() int         { return 0 }
func (*adapterTag) State() []*mlx.Array { return nil }
func (*adapterTag) Trimmable() bool     { return true }
func (*adapterTag) Trim(n int) int      { return n }
func (*adapterTag) Nbytes() int         { return 0 }
func (*adapterTag) Empty() bool         { return true }
func (*adapterTag) Free()               {}
func (t *adapterTag) String() string    { return fmt.Sprintf("adapter %d", t.adapter) }
func (m *adaptedLM) NewCaches(opts kv.Options) []kv.Cache {
	return append(m.lm.NewCaches(opts), &adapterTag{adapter: m.adapter})
}

// AdapterOf is the name of the adapter caches carry ("" for none, or for
// the caches of a model without adapters) and the layers' caches without
// the tag.
func AdapterOf(m Model, caches []kv.Cache) (string, []kv.Cache) {
	a, ok := m.(*adaptedLM)
	if !ok || len(caches) == 0 {
		return "", caches
	}
	t, ok := caches[len(caches)-1].(*adapterTag)
	if !ok || t.adapter < 0 || t.adapter >= len(a.names) {
		return "", caches[:len(caches)-len(tagOf(caches))]
	}
	return a.names[t.adapter], caches[:len(caches)-1]
}

func tagOf(caches []kv.Cache) []kv.Cache {
	if len(caches) > 0 {
		if _, ok := caches[len(caches)-1].(*adapterTag); ok {
			return caches[len(caches)-1:]
		}
	}
	return nil
}

// untag splits caches into the layers' and their adapter.
func (m *adaptedLM) untag(caches []kv.Cache) ([]kv.Cache, int, error) {
	if len(caches) != m.layers+1 {
		return nil, 0, fmt.Errorf("cannot run the model: %d caches for %d layers and the adapter entry (make them with the model's NewCaches)", len(caches), m.layers)
	}
	t, ok := caches[m.layers].(*adapterTag)
	if !ok || t.adapter >= len(m.names) {
		return nil, 0, fmt.Errorf("cannot run the model: its caches end with a %T, not the adapter entry its NewCaches makes", caches[m.layers])
	}
	return caches[:m.layers], t.adapter, nil
}

// Forward implements Model: the view's adapter without caches, else the
// caches' adapter.
func (m *adaptedLM) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	sel := m.adapter
	if caches != nil {
		var err error
		if caches, sel, err = m.untag(caches); err != nil {
			return mlx.ErrorArray(err)
		}
	}
	m.set.Select([]int{sel})
	defer m.set.Select(nil)
	return m.lm.Forward(tokens, caches)
}

// ForwardRows implements RowModel: each row with its caches' adapter.
func (m *adaptedLM) ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array {
	layers := make([][]kv.Cache, len(rows))
	sel := make([]int, len(rows))
	for r, caches := range rows {
		var err error
		if layers[r], sel[r], err = m.untag(caches); err != nil {
			return mlx.ErrorArray(fmt.Errorf("row %d: %w", r, err))
		}
	}
	m.set.Select(sel)
	defer m.set.Select(nil)
	return m.lm.ForwardRows(tokens, layers)
}

// ForwardPadded refuses, so that a padded decode batch can never run
// adapted rows as the base model: kv.Batch holds the layers' caches only,
// not the adapter entry, and refuses to take caches that end with one, so
// gen.Batch decodes adapted rows through ForwardRows.
func (m *adaptedLM) ForwardPadded(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	return mlx.ErrorArray(errors.New("cannot run rows of an adapted model as one padded batch: their adapters are in their own caches (decode them with ForwardRows)"))
}
