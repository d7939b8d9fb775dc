package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IndexName is the shard index a sharded model directory carries.
const IndexName = "model.safetensors.index.json"

// Set is the weights of one model directory: one or more files whose
// tensors are looked up by name.
type Set struct {
	Files []*File
	// IndexMetadata is the index's "metadata" object (e.g. total_size),
	// nil for an unsharded model.
	IndexMetadata map[string]any

	byName map[string]*File
}

// OpenDir opens the safetensors weights in dir. With model.safetensors.index.json
// it opens every shard the weight_map names, once, and checks each tensor is
// where the index says; without it, it opens every model*.safetensors file
// (as mlx-lm does). A tensor name found in two files is an error.
func OpenDir(dir string) (*Set, error) {
	s := &Set{byName: map[string]*File{}}
	indexPath := filepath.Join(dir, IndexName)
	idx, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		err = s.openSharded(dir, idx)
	case errors.Is(err, fs.ErrNotExist):
		err = s.openGlob(dir)
	default:
		err = fmt.Errorf("cannot read %s: %w", IndexName, err)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

type index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

func (s *Set) openSharded(dir string, data []byte) error {
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		return fmt.Errorf("cannot parse %s: %w", IndexName, err)
	}
	if len(idx.WeightMap) == 0 {
		return fmt.Errorf("%s has no weight_map", IndexName)
	}
	s.IndexMetadata = idx.Metadata
	shards := map[string]*File{}
	names := make([]string, 0, len(idx.WeightMap))
	for name := range idx.WeightMap {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic errors and file order
	for _, name := range names {
		shard := idx.WeightMap[name]
		// Shards are plain file names beside the index: never a path out of dir.
		if shard == "" || shard != filepath.Base(shard) || strings.ContainsAny(shard, `/\`) || shard == ".." {
			return fmt.Errorf("%s maps %s to %q, which is not a file name in the model directory", IndexName, name, shard)
		}
		f, ok := shards[shard]
		if !ok {
			var err error
			if f, err = Open(filepath.Join(dir, shard)); err != nil {
				return fmt.Errorf("cannot open shard %s listed in %s: %w", shard, IndexName, err)
			}
			shards[shard] = f
			s.Files = append(s.Files, f)
		}
		if _, ok := f.Tensor(name); !ok {
			return fmt.Errorf("tensor %s is missing from shard %s named for it in %s", name, shard, IndexName)
		}
		s.byName[name] = f
	}
	// Tensors in a shard but not in the index would be silently ignored by
	// index-driven loaders and loaded by glob-driven ones: refuse the ambiguity.
	for _, f := range s.Files {
		for _, t := range f.Tensors {
			if s.byName[t.Name] != f {
				return fmt.Errorf("tensor %s in %s is not listed for that file in %s", t.Name, filepath.Base(f.Path), IndexName)
			}
		}
	}
	return nil
}

func (s *Set) openGlob(dir string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "model*.safetensors"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no model*.safetensors files in %s", dir)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			return err
		}
		s.Files = append(s.Files, f)
		for _, t := range f.Tensors {
			if prev, dup := s.byName[t.Name]; dup {
				return fmt.Errorf("tensor %s is in both %s and %s", t.Name, filepath.Base(prev.Path), filepath.Base(p))
			}
			s.byName[t.Name] = f
		}
	}
	return nil
}

// Tensor is a tensor's header entry and its bytes (valid until Close).
type Tensor struct {
	TensorInfo
	Data []byte
}

// Release drops the named tensor's pages from the resident set once its
// bytes have been copied (File.Release); unknown names are ignored.
func (s *Set) Release(name string) {
	if f, ok := s.byName[name]; ok {
		if ti, ok := f.Tensor(name); ok {
			f.Release(ti)
		}
	}
}

// Tensor returns the named tensor without copying its data.
func (s *Set) Tensor(name string) (Tensor, bool) {
	f, ok := s.byName[name]
	if !ok {
		return Tensor{}, false
	}
	ti, _ := f.Tensor(name)
	return Tensor{TensorInfo: ti, Data: f.Data(ti)}, true
}

// Names returns every tensor name, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Close closes every file; tensors' data must not be used afterwards.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.Files {
		errs = append(errs, f.Close())
	}
	s.Files, s.byName = nil, nil
	return errors.Join(errs...)
}
