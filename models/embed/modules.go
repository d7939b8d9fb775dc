package embed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Pooling is how token vectors become one sentence vector.
type Pooling string

const (
	PoolMean Pooling = "mean"
	PoolCLS  Pooling = "cls"
	PoolMax  Pooling = "max"
	PoolLast Pooling = "lasttoken" // the last real token (decoder embedders)
)

// Pipeline is what a sentence-transformers model directory says about its
// modules: Transformer → Pooling → (Normalize).
type Pipeline struct {
	Pooling   Pooling
	Normalize bool // a Normalize module follows pooling
	// MaxSeqLength is sentence_bert_config.json's max_seq_length (0: absent).
	MaxSeqLength int
}

type stModule struct {
	Idx  int    `json:"idx"`
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// ParseModules reads modules.json. poolingConfig returns the Pooling
// module's config.json given its path. Modules we cannot run (Dense,
// WordEmbeddings, ...) are an error: silently skipping one would change
// every vector.
func ParseModules(data []byte, poolingConfig func(path string) ([]byte, error)) (*Pipeline, error) {
	var mods []stModule
	if err := json.Unmarshal(data, &mods); err != nil {
		return nil, fmt.Errorf("cannot parse modules.json: %w", err)
	}
	if len(mods) == 0 {
		return nil, errors.New("modules.json lists no modules")
	}
	p := &Pipeline{}
	sawTransformer, sawPooling := false, false
	for i, m := range mods {
		kind := m.Type[strings.LastIndex(m.Type, ".")+1:]
		switch {
		case kind == "Transformer" && i == 0:
			sawTransformer = true
		case kind == "Pooling" && sawTransformer && !sawPooling:
			data, err := poolingConfig(m.Path)
			if err != nil {
				return nil, fmt.Errorf("cannot read the pooling config: %w", err)
			}
			if p.Pooling, err = ParsePooling(data); err != nil {
				return nil, err
			}
			sawPooling = true
		case kind == "Normalize" && sawPooling && !p.Normalize:
			p.Normalize = true
		default:
			return nil, fmt.Errorf("modules.json: module %d (%q) is not supported here (Transformer, Pooling, Normalize in that order)", i, m.Type)
		}
	}
	if !sawPooling {
		return nil, errors.New("modules.json has no Pooling module after the Transformer")
	}
	return p, nil
}

// ParsePooling reads a Pooling module's config.json: exactly one mode may be
// on, since sentence-transformers concatenates several (a wider vector we do
// not produce).
func ParsePooling(data []byte) (Pooling, error) {
	var c struct {
		CLS      bool   `json:"pooling_mode_cls_token"`
		Mean     bool   `json:"pooling_mode_mean_tokens"`
		Max      bool   `json:"pooling_mode_max_tokens"`
		MeanSqrt bool   `json:"pooling_mode_mean_sqrt_len_tokens"`
		Weighted bool   `json:"pooling_mode_weightedmean_tokens"`
		Last     bool   `json:"pooling_mode_lasttoken"`
		Mode     string `json:"pooling_mode"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("cannot parse the pooling config: %w", err)
	}
	if c.MeanSqrt || c.Weighted {
		return "", errors.New("pooling modes mean_sqrt_len and weightedmean are not supported")
	}
	var on []Pooling
	for _, m := range []struct {
		set bool
		p   Pooling
	}{{c.CLS, PoolCLS}, {c.Mean, PoolMean}, {c.Max, PoolMax}, {c.Last, PoolLast}} {
		if m.set {
			on = append(on, m.p)
		}
	}
	if c.Mode != "" && len(on) == 0 {
		switch p := Pooling(c.Mode); p {
		case PoolCLS, PoolMean, PoolMax, PoolLast:
			return p, nil
		}
		return "", fmt.Errorf("pooling_mode %q is not supported", c.Mode)
	}
	if len(on) != 1 {
		return "", fmt.Errorf("the pooling config turns on %d modes, want exactly one", len(on))
	}
	return on[0], nil
}

// readPipeline reads dir's sentence-transformers files; without
// modules.json it falls back to def (a plain HF model directory).
func readPipeline(dir string, def Pipeline) (*Pipeline, error) {
	data, err := os.ReadFile(filepath.Join(dir, "modules.json"))
	var p *Pipeline
	switch {
	case errors.Is(err, os.ErrNotExist):
		p = &def
	case err != nil:
		return nil, fmt.Errorf("cannot read modules.json: %w", err)
	default:
		p, err = ParseModules(data, func(path string) ([]byte, error) {
			if filepath.IsAbs(path) || strings.Contains(path, "..") {
				return nil, fmt.Errorf("module path %q leaves the model directory", path)
			}
			return os.ReadFile(filepath.Join(dir, path, "config.json"))
		})
		if err != nil {
			return nil, err
		}
	}
	if sb, err := os.ReadFile(filepath.Join(dir, "sentence_bert_config.json")); err == nil {
		var c struct {
			MaxSeqLength int `json:"max_seq_length"`
		}
		if err := json.Unmarshal(sb, &c); err != nil {
			return nil, fmt.Errorf("cannot parse sentence_bert_config.json: %w", err)
		}
		if c.MaxSeqLength < 0 {
			return nil, fmt.Errorf("sentence_bert_config.json: max_seq_length %d is negative", c.MaxSeqLength)
		}
		p.MaxSeqLength = c.MaxSeqLength
	}
	return p, nil
}
