package gen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/tok"
)

// TestGrammarVocabMatchesTokenizerJSON: mlxgo gives the engine each token's
// bytes from tok (TokenBytes, the one path, which GGUF tokenizers need);
// llguidance can also read tokenizer.json itself. For four real tokenizers
// (byte-level BPE and SentencePiece with byte fallback), the masks both
// give, at every step of a JSON document and of free text under a regex,
// must be the same bits.
func TestGrammarVocabMatchesTokenizerJSON(t *testing.T) {
	mlxtest.Need(t)
	paths := map[string]string{
		"qwen3":   testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json"),
		"llama3":  testenv.DataFile(t, "tokenizers/llama3_1/tokenizer.json"),
		"gemma3":  testenv.DataFile(t, "tokenizers/gemma3/tokenizer.json"),
		"smollm2": filepath.Join(oracleModelDir(t, "smollm2-q4_1"), "tokenizer.json"),
	}
	doc := `{"name": "Zoë 🙂", "tags": ["a b", "ü"], "n": -12.5e3, "ok": true}`
	text := "Hello wörld, 你好! 🙂 tabs\tand\nnew lines"
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			js, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := tok.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			vocab := tk.VocabSize()
			eos := []int32{int32(vocab - 1)}
			fromJSON, err := mlx.NewGrammarTokenizer(js, vocab, eos)
			if err != nil {
				t.Fatal(err)
			}
			defer fromJSON.Close()
			fromTok, err := mlx.NewGrammarTokenizerFromVocab(vocabBytes(tk, vocab), eos)
			if err != nil {
				t.Fatal(err)
			}
			defer fromTok.Close()
			for _, c := range []struct{ kind, grammar, input string }{
				{mlx.GrammarJSONSchema, `{"type":"object"}`, doc},
				{mlx.GrammarRegex, `(?s:.*)`, text},
			} {
				ids, err := tk.Encode(c.input, false)
				if err != nil {
					t.Fatal(err)
				}
				a, err := fromJSON.NewMatcher(c.kind, c.grammar)
				if err != nil {
					t.Fatal(err)
				}
				b, err := fromTok.NewMatcher(c.kind, c.grammar)
				if err != nil {
					t.Fatal(err)
				}
				ma, mb := make([]uint32, a.MaskWords()), make([]uint32, b.MaskWords())
				for step, id := range ids {
					if err := a.Mask(ma); err != nil {
						t.Fatal(err)
					}
					if err := b.Mask(mb); err != nil {
						t.Fatal(err)
					}
					for w := range ma {
						if ma[w] != mb[w] {
							t.Fatalf("%s step %d: masks differ at tokens %d..%d (%032b vs %032b)", c.kind, step, w*32, w*32+31, ma[w], mb[w])
						}
					}
					if err := a.Consume(id); err != nil {
						t.Fatalf("%s step %d: %v", c.kind, step, err)
					}
					if err := b.Consume(id); err != nil {
						t.Fatalf("%s step %d: %v", c.kind, step, err)
					}
				}
				a.Close()
				b.Close()
			}
		})
	}
}
