package tok

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

var fuzzSeeds = []string{"", "hello world", "  \n\n\t x", "I'LL 12345 ſ", "<|end|>he<|end|>", "日本語 👩‍💻 é", "\xff\xfe", "a\u0301\u0327", "\u2028\u0085"}

// FuzzByteLevelRoundTrip: byte-level BPE must give back any valid UTF-8 text.
func FuzzByteLevelRoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	tk := tinyByteLevel(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := tk.Encode(s, true)
		if err != nil {
			t.Fatal(err)
		}
		got := tk.Decode(ids, false)
		if utf8.ValidString(s) && got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

var (
	realOnce sync.Once
	realToks map[string]*Tokenizer
)

// realTokenizers loads the registry tokenizers that are present (fuzzing
// works without them, on the tiny tokenizer alone).
func realTokenizers() map[string]*Tokenizer {
	realOnce.Do(func() {
		realToks = map[string]*Tokenizer{}
		for _, rel := range []string{"tokenizers/qwen3", "tokenizers/gemma3", "tokenizers/llama3", "all-minilm-l6-v2", "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"} {
			p := filepath.Join(testenv.DataDir(), rel)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if tk, err := Load(p); err == nil {
				realToks[rel] = tk
			}
		}
	})
	return realToks
}

// FuzzRealTokenizers: no panics on any input; byte-level ones round-trip.
func FuzzRealTokenizers(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	toks := realTokenizers()
	f.Fuzz(func(t *testing.T, s string) {
		for name, tk := range toks {
			ids, err := tk.Encode(s, false)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := tk.Decode(ids, false)
			byteLevel := strings.Contains(name, "qwen3") || strings.Contains(name, "llama3") || strings.Contains(name, "smollm2")
			if byteLevel && utf8.ValidString(s) && got != norm(name, s) {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", name, s, got)
			}
			d := tk.NewDetokenizer(false)
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(d.Next(id))
			}
			b.WriteString(d.Flush())
			if b.String() != got {
				t.Fatalf("%s: streamed %q, Decode %q", name, b.String(), got)
			}
		}
	})
}

// norm is what a byte-level tokenizer gives back: Qwen3 normalizes to NFC.
func norm(name, s string) string {
	if strings.Contains(name, "qwen3") {
		return unicodeNormalizer{0}.normalize(s)
	}
	return s
}

// FuzzLoadJSON: malformed tokenizer.json must be an error, never a panic.
func FuzzLoadJSON(f *testing.F) {
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel"}}`))
	f.Add([]byte(`{"model":{"type":"WordPiece","vocab":{"[UNK]":0,"a":1},"unk_token":"[UNK]"},"normalizer":{"type":"BertNormalizer"}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{},"merges":[]},"decoder":{"type":"Sequence","decoders":[{"type":"Strip","content":" ","start":1,"stop":9}]}}`))
	f.Add([]byte(`{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"MergedWithNext"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := FromJSON(data)
		if err != nil {
			return
		}
		for _, s := range []string{"a b", "ab\n", " ab ab", "é"} {
			ids, err := tk.Encode(s, true)
			if err == nil {
				tk.Decode(ids, false)
				tk.Decode(ids, true)
			}
		}
	})
}
