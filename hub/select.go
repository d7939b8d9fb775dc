package hub

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// modelFiles are the small files a model directory may need besides its
// weights: config, tokenizer, chat templates, generation defaults, and a
// sentence-transformers pipeline.
var modelFiles = map[string]bool{
	"config.json": true, "generation_config.json": true,
	"tokenizer.json": true, "tokenizer_config.json": true, "special_tokens_map.json": true,
	"added_tokens.json": true, "tokenizer.model": true, "vocab.json": true, "merges.txt": true, "vocab.txt": true,
	"chat_template.jinja": true, "chat_template.json": true, "preprocessor_config.json": true,
	"modules.json": true, "sentence_bert_config.json": true, "config_sentence_transformers.json": true,
}

// IndexFile names the shards of a sharded safetensors model.
const IndexFile = "model.safetensors.index.json"

// wanted reports whether a non-weight file belongs to the model: the files
// above, additional chat templates, and the config of a sentence-transformers
// module directory (1_Pooling/config.json).
func wanted(name string) bool {
	if modelFiles[name] {
		return true
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	switch {
	case dir == "additional_chat_templates" && strings.HasSuffix(base, ".jinja"):
		return true
	case base == "config.json" && !strings.Contains(dir, "/") && len(dir) > 2 && dir[0] >= '0' && dir[0] <= '9' && strings.Contains(dir, "_"):
		return true
	}
	return false
}

// Selection is what a pull takes from a repo: the files to fetch, and the
// shard index to read first when the weights are sharded.
type Selection struct {
	Files []Sibling
	Index *Sibling // fetch, then Shards names the rest
	GGUF  string   // the GGUF file when the model is one
}

// Select picks the files a model needs from a repo listing: with gguf set,
// that one GGUF file alone (it holds its tokenizer and template); otherwise
// the model's small files and its safetensors weights (the shard index and
// what it names, or model.safetensors, or every top-level .safetensors), and
// failing those, the repo's only .gguf.
func Select(ri *RepoInfo, gguf string) (*Selection, error) {
	byName := map[string]Sibling{}
	var ggufs, tensors []string
	for _, s := range ri.Siblings {
		byName[s.Name] = s
		if strings.HasSuffix(s.Name, ".gguf") {
			ggufs = append(ggufs, s.Name)
		}
		if strings.HasSuffix(s.Name, ".safetensors") && !strings.Contains(s.Name, "/") {
			tensors = append(tensors, s.Name)
		}
	}
	sort.Strings(ggufs)
	sort.Strings(tensors)
	if gguf != "" {
		s, ok := byName[gguf]
		if !ok || !strings.HasSuffix(gguf, ".gguf") {
			return nil, fmt.Errorf("%s has no GGUF file %q (it has %s)", ri.ID, gguf, listOrNone(ggufs))
		}
		return &Selection{Files: []Sibling{s}, GGUF: gguf}, nil
	}
	sel := &Selection{}
	for _, s := range ri.Siblings {
		if wanted(s.Name) {
			sel.Files = append(sel.Files, s)
		}
	}
	switch {
	case byName[IndexFile].Name != "":
		idx := byName[IndexFile]
		sel.Index = &idx
	case byName["model.safetensors"].Name != "":
		sel.Files = append(sel.Files, byName["model.safetensors"])
	case len(tensors) > 0:
		for _, t := range tensors {
			sel.Files = append(sel.Files, byName[t])
		}
	case len(ggufs) == 1:
		return &Selection{Files: []Sibling{byName[ggufs[0]]}, GGUF: ggufs[0]}, nil
	case len(ggufs) > 1:
		return nil, fmt.Errorf("%s has %d GGUF files: choose one with --file (%s)", ri.ID, len(ggufs), strings.Join(ggufs, ", "))
	default:
		return nil, fmt.Errorf("%s has no safetensors or GGUF weights (mlxgo reads those two formats)", ri.ID)
	}
	if byName["config.json"].Name == "" {
		return nil, fmt.Errorf("%s has safetensors weights but no config.json", ri.ID)
	}
	return sel, nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no .gguf file"
	}
	return strings.Join(names, ", ")
}

// Shards returns the siblings the shard index names, checking that each
// is a top-level .safetensors file of the listing.
func Shards(ri *RepoInfo, index []byte) ([]Sibling, error) {
	names, err := ParseIndex(index)
	if err != nil {
		return nil, err
	}
	byName := map[string]Sibling{}
	for _, s := range ri.Siblings {
		byName[s.Name] = s
	}
	var out []Sibling
	for _, n := range names {
		s, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("%s names shard %q, which %s does not have", IndexFile, n, ri.ID)
		}
		out = append(out, s)
	}
	return out, nil
}

// ParseIndex returns the distinct shard files of a safetensors index's
// weight_map, sorted.
func ParseIndex(data []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", IndexFile, err)
	}
	seen := map[string]bool{}
	var names []string
	for _, f := range idx.WeightMap {
		if seen[f] {
			continue
		}
		if err := checkRepoPath(f); err != nil || strings.Contains(f, "/") || !strings.HasSuffix(f, ".safetensors") {
			return nil, fmt.Errorf("%s names %q, not a .safetensors file beside it", IndexFile, f)
		}
		seen[f] = true
		names = append(names, f)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has an empty weight_map", IndexFile)
	}
	sort.Strings(names)
	return names, nil
}
