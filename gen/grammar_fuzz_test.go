package gen

import (
	"errors"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/tok"
)

var (
	fuzzGrammarsOnce sync.Once
	fuzzGrammars     *Grammars
	fuzzGrammarsErr  error
)

// FuzzGrammarCompile feeds arbitrary text as each grammar kind a request or
// a --json-schema/--grammar file can give: it compiles or is an error (an
// ErrGrammar for what the engine rejects), never a crash or a hang; and
// what compiles gives a mask with at least one token allowed, or only the
// end token when the grammar can only end.
func FuzzGrammarCompile(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`,
		`{"type":"array","items":{"enum":["x","y"]},"minItems":1,"maxItems":3}`,
		`{"anyOf":[{"type":"string","pattern":"^a+$"},{"type":"null"}]}`,
		`{"$ref":"#/definitions/x","definitions":{"x":{"type":"boolean"}}}`,
		`true`, `false`, `{}`, `[1]`, `{"type":"objekt"}`, `{"x-guidance":{"whitespace_flexible":true}}`,
	} {
		f.Add(uint8(0), s)
	}
	for _, s := range []string{`(yes|no)`, `[a-z]{1,5}`, `(`, `\d+`} {
		f.Add(uint8(1), s)
	}
	for _, s := range []string{`start: "a" | "b"`, `start: x` + "\n" + `x: %json {"type":"integer"}`, `start: missing`, `start: /[0-9]+/`} {
		f.Add(uint8(2), s)
	}
	f.Fuzz(func(t *testing.T, kind uint8, src string) {
		mlxtest.Need(t)
		fuzzGrammarsOnce.Do(func() {
			path := testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json")
			var tk *tok.Tokenizer
			if tk, fuzzGrammarsErr = tok.Load(path); fuzzGrammarsErr == nil {
				end, _ := tk.TokenToID("<|im_end|>")
				fuzzGrammars = NewGrammars(tk, 151936, []int32{end})
			}
		})
		if fuzzGrammarsErr != nil {
			t.Fatal(fuzzGrammarsErr)
		}
		k := []string{mlx.GrammarJSONSchema, mlx.GrammarRegex, mlx.GrammarLark}[int(kind)%3]
		gr, err := fuzzGrammars.Compile(k, src)
		if err != nil {
			var me *mlx.Error
			if !errors.Is(err, ErrGrammar) && !errors.As(err, &me) {
				t.Fatalf("%s %q: an error of neither the engine nor the grammar: %v", k, src, err)
			}
			return
		}
		p, err := gr.Processor()
		if err != nil {
			t.Fatalf("%s %q compiled but starts no state: %v", k, src, err)
		}
		defer p.Close()
		if err := p.m.Mask(p.mask); err != nil {
			return // an empty language: the engine says so when asked
		}
		for _, w := range p.mask {
			if w != 0 {
				return
			}
		}
		t.Fatalf("%s %q: a compiled grammar allows no token at all", k, src)
	})
}
