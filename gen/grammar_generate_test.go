package gen

import (
	"encoding/json"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

// TestGenerateWithGrammar constrains real SmolLM2 (the oracle's MLX
// conversion, with its tokenizer.json) to a JSON schema, alone and as rows
// of a batch: every output parses and meets the schema, the batched rows
// (each its own grammar state) equal their solo runs, and no grammar state
// or array is left behind.
func TestGenerateWithGrammar(t *testing.T) {
	dir := oracleModelDir(t, "smollm2-q4_1")
	mlxtest.Need(t)
	tk, err := tok.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":16},"age":{"type":"integer","minimum":0,"maximum":40},
		"colour":{"enum":["black","white","ginger","grey"]}},"required":["name","age","colour"],"additionalProperties":false}`
	prompts := []string{"Here is a cat described as JSON:\n", "My neighbour's old cat, as a JSON record:\n"}
	var solo, batched [][]int32
	mlxtest.Do(t, func() error {
		m, err := models.Load(dir, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer m.Close()
		info := m.Info()
		eos := info.EOSIDs(tk.EOSIDs()...)
		g := NewGrammars(tk, info.VocabSize, eos)
		gr, err := g.Compile(mlx.GrammarJSONSchema, schema)
		if err != nil {
			return err
		}
		live := mlx.LiveArrays()
		var specs []batchSpec
		for i, p := range prompts {
			ids, err := tk.Encode(p, false)
			if err != nil {
				return err
			}
			sp := batchSpec{name: p, prompt: ids, addAt: i, o: Options{MaxTokens: 48, EOS: eos, VocabSize: info.VocabSize, Grammar: gr}}
			out, _, err := serialRun(m, sp)
			if err != nil {
				return err
			}
			solo = append(solo, out)
			specs = append(specs, sp)
		}
		res, _, err := batchRun(m.(RowModel), specs)
		if err != nil {
			return err
		}
		for _, r := range res {
			batched = append(batched, r.tokens)
		}
		if n := mlx.LiveArrays(); n != live {
			t.Errorf("%d live arrays after the runs, %d before", n, live)
		}
		return nil
	})
	for i, out := range solo {
		text := tk.Decode(out, true)
		var v struct {
			Name   *string `json:"name"`
			Age    *int    `json:"age"`
			Colour string  `json:"colour"`
		}
		if err := json.Unmarshal([]byte(text), &v); err != nil || v.Name == nil || v.Age == nil || len(*v.Name) > 16 || *v.Age < 0 || *v.Age > 40 {
			t.Errorf("prompt %d: %q is not the schema's JSON (%v)", i, text, err)
		}
		switch v.Colour {
		case "black", "white", "ginger", "grey":
		default:
			t.Errorf("prompt %d: colour %q", i, v.Colour)
		}
		t.Logf("prompt %d: %s", i, text)
		if len(batched) != len(solo) || !equalIDs(batched[i], out) {
			t.Errorf("prompt %d: batched %v, solo %v", i, batched[i], out)
		}
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
