package gguf

import (
	"encoding/json"
	"math"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

const smollm2 = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

func TestSmolLM2Metadata(t *testing.T) {
	f, err := Open(testenv.DataFile(t, smollm2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Architecture() != "llama" {
		t.Errorf("version %d architecture %q, want 3 llama", f.Version, f.Architecture())
	}
	if n, ok := f.Int("llama.block_count"); !ok || n != 30 {
		t.Errorf("llama.block_count = %d, %v; want 30", n, ok)
	}
	if base, ok := f.Float("llama.rope.freq_base"); !ok || base != 100000 {
		t.Errorf("llama.rope.freq_base = %v, %v; want 100000", base, ok)
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) != 49152 || toks[0] != "<|endoftext|>" || toks[1] != "<|im_start|>" {
		t.Errorf("tokenizer.ggml.tokens: %d tokens, ok %v", len(toks), ok)
	}
	types, ok := f.Int32s("tokenizer.ggml.token_type")
	if !ok || len(types) != len(toks) || types[0] != 3 {
		t.Errorf("tokenizer.ggml.token_type: %d entries, ok %v", len(types), ok)
	}
	if tmpl, _ := f.String("tokenizer.chat_template"); !strings.Contains(tmpl, "<|im_start|>") {
		t.Errorf("chat template lacks <|im_start|>: %.60q", tmpl)
	}
	if add, ok := f.Bool("tokenizer.ggml.add_bos_token"); !ok || add {
		t.Errorf("tokenizer.ggml.add_bos_token = %v, %v; want false, true", add, ok)
	}
	if len(f.Tensors) != 272 {
		t.Errorf("%d tensors, want 272", len(f.Tensors))
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Type != Q8_0 || !reflect.DeepEqual(emb.Shape(), []int{49152, 576}) {
		t.Errorf("token_embd.weight = %+v shape %v", emb, emb.Shape())
	}
}

// TestMetadataOracle compares every key, value and tensor entry with what
// llama.cpp's gguf-py reads from the same file.
func TestMetadataOracle(t *testing.T) {
	path := testenv.DataFile(t, smollm2)
	py := testenv.Python(t)
	out, err := exec.Command(py, "testdata/metadata.py", path).Output()
	if err != nil {
		testenv.Missing(t, "gguf-py in .venv ("+err.Error()+")", "make venv (gguf==0.19.0)")
	}
	var want struct {
		Metadata map[string]struct {
			Types []string
			Value any
		}
		Tensors []struct {
			Name, Type   string
			Dims         []uint64
			Offset, Size int64
		}
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Keys()) != len(want.Metadata) {
		t.Errorf("%d keys, gguf-py has %d", len(f.Keys()), len(want.Metadata))
	}
	for key, w := range want.Metadata {
		v, ok := f.Value(key)
		if !ok {
			t.Errorf("missing key %q", key)
			continue
		}
		if got := strings.ToUpper(v.Type.String()); got != w.Types[0] {
			t.Errorf("%s: type %s, gguf-py %s", key, got, w.Types[0])
		}
		if !sameJSON(v.Data, w.Value) {
			t.Errorf("%s: value differs from gguf-py's", key)
		}
	}
	if len(f.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, gguf-py has %d", len(f.Tensors), len(want.Tensors))
	}
	for i, w := range want.Tensors {
		g := f.Tensors[i]
		if g.Name != w.Name || g.Type.String() != w.Type || !reflect.DeepEqual(g.Dims, w.Dims) ||
			f.DataOffset+int64(g.Offset) != w.Offset || int64(g.Size) != w.Size {
			t.Errorf("tensor %d: got %s %s %v @%d+%d, gguf-py %+v", i, g.Name, g.Type, g.Dims, f.DataOffset+int64(g.Offset), g.Size, w)
		}
	}
}

// sameJSON compares a decoded Go value with its JSON-decoded counterpart.
func sameJSON(got, want any) bool {
	rv := reflect.ValueOf(got)
	if rv.Kind() == reflect.Slice {
		ws, ok := want.([]any)
		if !ok || len(ws) != rv.Len() {
			return false
		}
		for i := range ws {
			if !sameJSON(rv.Index(i).Interface(), ws[i]) {
				return false
			}
		}
		return true
	}
	switch x := got.(type) {
	case string, bool:
		return got == want
	case Value:
		return sameJSON(x.Data, want)
	}
	wf, ok := want.(float64)
	if !ok {
		return false
	}
	switch x := got.(type) {
	case float32:
		return float64(x) == wf || math.IsNaN(float64(x)) && math.IsNaN(wf)
	case float64:
		return x == wf
	}
	i, ok := asInt(got)
	return ok && float64(i) == wf
}
