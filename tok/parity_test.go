package tok

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// The parity tests encode a >1 MB corpus (tok/testdata/gen_corpus.py, fixed
// seed) with mlxgo and with the pinned Hugging Face tokenizers and require
// identical ids and decodes. Corpus and oracle outputs are cached under
// .cache/tok/, keyed by the hash of everything that produced them.

func cacheDir(t testing.TB) string {
	d := filepath.Join(testenv.RepoRoot(), ".cache", "tok")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatalf("cannot create cache dir: %v", err)
	}
	return d
}

func hashFiles(t testing.TB, extra string, paths ...string) string {
	h := sha256.New()
	h.Write([]byte(extra))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("cannot hash %s: %v", p, err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// runPython runs a script from tok/testdata with the oracle venv into out (atomically).
func runPython(t testing.TB, out string, script string, args ...string) {
	t.Helper()
	if _, err := os.Stat(out); err == nil {
		return
	}
	py := testenv.Python(t)
	tmp := out + ".tmp"
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(os.Environ(), "TOKENIZERS_PARALLELISM=false", "HF_HUB_OFFLINE=1")
	var stdout *os.File
	if strings.HasSuffix(out, ".jsonl") && script == "gen_corpus.py" {
		f, err := os.Create(tmp)
		if err != nil {
			t.Fatal(err)
		}
		stdout = f
		cmd.Stdout = f
	}
	if b, err := combined(cmd); err != nil {
		t.Fatalf("%s failed: %v\n%s", script, err, b)
	}
	if stdout != nil {
		stdout.Close()
		if err := os.Rename(tmp, out); err != nil {
			t.Fatal(err)
		}
	}
}

func combined(cmd *exec.Cmd) ([]byte, error) {
	var buf strings.Builder
	cmd.Stderr = &buf
	if cmd.Stdout == nil {
		cmd.Stdout = &buf
	}
	err := cmd.Run()
	return []byte(buf.String()), err
}

// corpus returns the parity corpus documents.
func corpus(t testing.TB) []string {
	t.Helper()
	path := filepath.Join(cacheDir(t), "corpus-"+hashFiles(t, "", "testdata/gen_corpus.py")+".jsonl")
	runPython(t, path, "gen_corpus.py")
	docs, err := readJSONLines[string](path)
	if err != nil {
		t.Fatalf("cannot read corpus: %v", err)
	}
	return docs
}

func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

type oracleLine struct {
	IDs  []int32 `json:"ids"`
	Text string  `json:"text"`
}

// oracle encodes the corpus with tokenizers from tokenizerJSON.
func oracle(t testing.TB, tokenizerJSON string, addSpecial bool) []oracleLine {
	t.Helper()
	docs := filepath.Join(cacheDir(t), "corpus-"+hashFiles(t, "", "testdata/gen_corpus.py")+".jsonl")
	flag := fmt.Sprint(addSpecial)
	out := filepath.Join(cacheDir(t), "oracle-"+hashFiles(t, flag, docs, tokenizerJSON, "testdata/oracle_tok.py")+".jsonl")
	if _, err := os.Stat(out); err != nil {
		args := []string{tokenizerJSON, docs, out + ".part"}
		if addSpecial {
			args = append(args, "--add-special")
		}
		runPython(t, out, "oracle_tok.py", args...)
		if err := os.Rename(out+".part", out); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := readJSONLines[oracleLine](out)
	if err != nil {
		t.Fatalf("cannot read oracle output: %v", err)
	}
	return lines
}

// smolJSON converts the SmolLM2 GGUF's tokenizer to tokenizer.json with the reference converter.
func smolJSON(t testing.TB, gguf string) string {
	dir := filepath.Join(cacheDir(t), "smollm2-"+hashFiles(t, "", "testdata/gguf_to_json.py"))
	out := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runPython(t, out, "gguf_to_json.py", gguf, dir)
	return out
}

type parityCase struct {
	name string
	load func(t testing.TB) (*Tokenizer, string) // the tokenizer and the tokenizer.json the oracle uses
}

func parityCases() []parityCase {
	dirCase := func(name, rel string) parityCase {
		return parityCase{name, func(t testing.TB) (*Tokenizer, string) {
			p := testenv.DataFile(t, rel)
			tk, err := Load(filepath.Dir(p))
			if err != nil {
				t.Fatalf("cannot load %s: %v", name, err)
			}
			tk.Truncation, tk.Padding = nil, nil
			return tk, p
		}}
	}
	return []parityCase{
		dirCase("qwen3", "tokenizers/qwen3/tokenizer.json"),
		dirCase("gemma3", "tokenizers/gemma3/tokenizer.json"),
		dirCase("llama3", "tokenizers/llama3/tokenizer.json"),
		dirCase("llama3_1", "tokenizers/llama3_1/tokenizer.json"),
		dirCase("minilm", "all-minilm-l6-v2/tokenizer.json"),
		{"smollm2-gguf", func(t testing.TB) (*Tokenizer, string) {
			p := testenv.DataFile(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
			tk, err := Load(p)
			if err != nil {
				t.Fatalf("cannot load smollm2: %v", err)
			}
			return tk, smolJSON(t, p)
		}},
		// Gemma 3's GGUF tokenizer (SentencePiece by scores) against Gemma 3's
		// own tokenizer.json, the same vocabulary.
		{"gemma3-gguf", func(t testing.TB) (*Tokenizer, string) {
			p := testenv.DataFile(t, "gemma3-270m/gemma-3-270m-q4_k_m.gguf")
			tk, err := Load(p)
			if err != nil {
				t.Fatalf("cannot load the gemma3 gguf tokenizer: %v", err)
			}
			return tk, testenv.DataFile(t, "tokenizers/gemma3/tokenizer.json")
		}},
	}
}

func TestParity(t *testing.T) {
	if testing.Short() {
		t.Skip("parity corpus is slow; run without -short")
	}
	docs := corpus(t)
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	if size < 1<<20 {
		t.Fatalf("corpus is %d bytes, want at least 1 MiB", size)
	}
	for _, tc := range parityCases() {
		t.Run(tc.name, func(t *testing.T) {
			tk, js := tc.load(t)
			for _, add := range []bool{false, true} {
				want := oracle(t, js, add)
				if len(want) != len(docs) {
					t.Fatalf("oracle has %d lines for %d documents", len(want), len(docs))
				}
				bad := 0
				for i, doc := range docs {
					got, err := tk.Encode(doc, add)
					if err != nil {
						t.Fatalf("doc %d: %v", i, err)
					}
					if !slices.Equal(got, want[i].IDs) {
						if bad++; bad <= 3 {
							t.Errorf("add_special=%v doc %d: ids differ%s", add, i, firstDiff(tk, got, want[i].IDs, doc))
						}
						continue
					}
					if dec := tk.Decode(got, false); dec != want[i].Text {
						if bad++; bad <= 3 {
							t.Errorf("add_special=%v doc %d: decode differs:\n got %q\nwant %q", add, i, dec, want[i].Text)
						}
					}
				}
				if bad > 0 {
					t.Errorf("add_special=%v: %d of %d documents differ", add, bad, len(docs))
				}
			}
		})
	}
}

// firstDiff describes the first differing id with the tokens around it.
func firstDiff(tk *Tokenizer, got, want []int32, doc string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	show := func(ids []int32) string {
		lo, hi := max(i-3, 0), min(i+4, len(ids))
		var parts []string
		for _, id := range ids[lo:hi] {
			s, _ := tk.IDToToken(id)
			parts = append(parts, fmt.Sprintf("%d:%q", id, s))
		}
		return strings.Join(parts, " ")
	}
	ctx := doc
	if len(ctx) > 200 {
		ctx = ctx[:200] + "..."
	}
	return fmt.Sprintf(" at index %d (len got %d want %d)\n got %s\nwant %s\n doc %q", i, len(got), len(want), show(got), show(want), ctx)
}
