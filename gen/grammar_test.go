package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/tok"
)

// TestGrammarProcessorGreedy runs the processor as the loop does — mask,
// take the most likely allowed token, feed it back through the history — on
// random logits over Qwen3's vocabulary: whatever the logits, the text must
// be the schema's JSON, and every disallowed logit must be -inf.
func TestGrammarProcessorGreedy(t *testing.T) {
	mlxtest.Need(t)
	path := testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json")
	tk, err := tok.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	const vocab = 151936
	end, _ := tk.TokenToID("<|im_end|>")
	g := NewGrammars(tk, vocab, []int32{end})
	schema := `{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":99}},"required":["ok","n"],"additionalProperties":false}`
	gr, err := g.Compile(mlx.GrammarJSONSchema, schema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Compile(mlx.GrammarJSONSchema, `{"type":"objekt"}`); err == nil {
		t.Fatal("an invalid schema compiled")
	}
	p, err := gr.Processor()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Errors come back from the executor as values: t.Fatal there would
	// end the executor's goroutine.
	mlxtest.Do(t, func() error {
		mlx.Seed(7)
		history := mlx.FromSlice([]int32{1, 2, 3}) // the prompt
		var out []int32
		for step := 0; step < 64; step++ {
			logits := mlx.Normal([]int{1, vocab}, mlx.Float32, 0, 1, nil)
			masked := p.Process(history, logits)
			y := mlx.Argmax(masked, -1, false)
			if err := mlx.Eval(masked, y); err != nil {
				return err
			}
			vals, _ := masked.Float32s()
			finite := 0
			for _, v := range vals {
				if !math.IsInf(float64(v), -1) {
					finite++
				}
			}
			if finite == 0 || finite == vocab {
				return fmt.Errorf("step %d: %d tokens allowed", step, finite)
			}
			id, _ := y.Int32s()
			if id[0] == end {
				if !p.Done() {
					return errors.New("end allowed before the JSON is complete")
				}
				var v struct {
					OK *bool `json:"ok"`
					N  *int  `json:"n"`
				}
				text := tk.Decode(out, false)
				if err := json.Unmarshal([]byte(text), &v); err != nil || v.OK == nil || v.N == nil || *v.N < 0 || *v.N > 99 {
					return fmt.Errorf("output %q is not the schema's JSON (%v)", text, err)
				}
				return nil
			}
			out = append(out, id[0])
			history = mlx.Concatenate([]*mlx.Array{history, y}, 0)
		}
		return fmt.Errorf("no end after 64 tokens: %q", tk.Decode(out, false))
	})
}
