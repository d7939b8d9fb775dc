package gen

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/tok"
)

// validateScript checks each line's {"schema", "doc"} with the reference
// validator (Python jsonschema, draft 4) and prints one verdict per line.
const validateScript = `
import json, sys
from jsonschema import Draft4Validator
for line in sys.stdin:
    c = json.loads(line)
    try:
        doc = json.loads(c["doc"])
    except ValueError as e:
        print(json.dumps({"ok": False, "why": "not JSON: %s" % e})); continue
    errs = [e.message for e in Draft4Validator(c["schema"]).iter_errors(doc)]
    print(json.dumps({"ok": not errs, "why": "; ".join(errs)}))
`

// TestGrammarJSONSchemaSuite compiles every draft-4 schema of the
// JSON-Schema-Test-Suite (npm json-schema-test-suite@0.0.10, make
// data-jsonschema), generates a document under each with a seeded walk
// that stands in for a model (random tokens, leaning to the ones that close
// things so the walk ends), and has Python's jsonschema validate them all:
// every document must be valid, at least 50 schemas must produce one, and a
// schema the engine cannot take must be an error with a message (what serve
// returns as a 400).
func TestGrammarJSONSchemaSuite(t *testing.T) {
	mlxtest.Need(t)
	dir := testenv.DataFile(t, "json-schema-test-suite/tests/draft4")
	tkPath := testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json")
	py := testenv.Python(t)
	tk, err := tok.Load(tkPath)
	if err != nil {
		t.Fatal(err)
	}
	const vocab = 151936
	end, _ := tk.TokenToID("<|im_end|>")
	g := NewGrammars(tk, vocab, []int32{end})
	text := make([]string, tk.VocabSize())
	for id := range text {
		text[id] = tk.Decode([]int32{int32(id)}, false)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	sort.Strings(files)
	type sample struct {
		name   string
		schema json.RawMessage
		doc    string
	}
	var samples []sample
	unsupported := map[string]string{}
	unfinished := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []struct {
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
		}
		if err := json.Unmarshal(raw, &groups); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, grp := range groups {
			name := strings.TrimSuffix(filepath.Base(f), ".json") + "/" + grp.Description
			gr, err := g.Compile(mlx.GrammarJSONSchema, string(grp.Schema))
			if err != nil {
				if !strings.Contains(err.Error(), ErrGrammar.Error()) || len(err.Error()) <= len(ErrGrammar.Error())+2 {
					t.Errorf("%s: an error without the engine's reason: %v", name, err)
				}
				unsupported[name] = err.Error()
				continue
			}
			doc, ok := walkGrammar(t, gr, text, end, rand.New(rand.NewPCG(uint64(len(samples)), uint64(i))))
			if !ok {
				unfinished++
				continue
			}
			samples = append(samples, sample{name, grp.Schema, doc})
		}
	}
	var in bytes.Buffer
	for _, s := range samples {
		line, _ := json.Marshal(map[string]any{"schema": s.schema, "doc": s.doc})
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command(py, "-c", validateScript)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("validator: %v", err)
	}
	verdicts := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(verdicts) != len(samples) {
		t.Fatalf("%d verdicts for %d documents", len(verdicts), len(samples))
	}
	for i, line := range verdicts {
		var v struct {
			OK  bool   `json:"ok"`
			Why string `json:"why"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil || !v.OK {
			t.Errorf("%s: document %q breaks its schema %s: %s", samples[i].name, samples[i].doc, samples[i].schema, v.Why)
		}
	}
	for name, why := range unsupported {
		t.Logf("not compiled: %s: %s", name, why)
	}
	t.Logf("%d schemas: %d documents valid, %d not compiled, %d walks unfinished", len(samples)+len(unsupported)+unfinished, len(samples), len(unsupported), unfinished)
	if len(samples) < 50 {
		t.Fatalf("only %d schemas produced a document, want at least 50", len(samples))
	}
}

// walkGrammar generates under gr: at each step the end token when the
// grammar allows it, else with probability 0.7 the allowed token that
// closes the most (a quote, a bracket, a digit), otherwise a random allowed
// token of at most 4 bytes.
func walkGrammar(t *testing.T, gr *Grammar, text []string, end int32, r *rand.Rand) (string, bool) {
	m, err := gr.matcher()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mask := make([]uint32, m.MaskWords())
	const closers = `"}]0123456789,:`
	var doc strings.Builder
	for step := 0; step < 400; step++ {
		if err := m.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if mask[end>>5]&(1<<(end&31)) != 0 {
			return doc.String(), true
		}
		best, bestRank := -1, len(closers)+1
		var short []int
		for id := range text {
			if mask[id>>5]&(1<<(id&31)) == 0 {
				continue
			}
			if s := text[id]; len(s) == 1 {
				if k := strings.IndexByte(closers, s[0]); k >= 0 && k < bestRank {
					best, bestRank = id, k
				}
			}
			if len(text[id]) <= 4 {
				short = append(short, id)
			}
		}
		pick := best
		if pick < 0 || r.Float64() >= 0.7 {
			if len(short) > 0 {
				pick = short[r.IntN(len(short))]
			}
		}
		if pick < 0 {
			return "", false
		}
		if err := m.Consume(int32(pick)); err != nil {
			t.Fatal(err)
		}
		doc.WriteString(text[pick])
	}
	if os.Getenv("GRAMMAR_DEBUG") != "" {
		t.Logf("unfinished: %q", doc.String())
	}
	return "", false
}
