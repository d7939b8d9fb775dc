package tok

import (
	"os"
	"path/filepath"
	"slices"
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

// FuzzGemma3GGUFMatchesJSON: Gemma 3's tokenizer built from GGUF metadata
// (SentencePiece merges by score) gives the ids and text of the one built
// from Gemma 3's tokenizer.json, for any input without a literal "▁"
// (U+2581). The GGUF stores Gemma's whitespace-run tokens ("▁▁" in
// tokenizer.json) as spaces, so text that already holds "▁" tokenizes as
// llama.cpp does it instead (TestGemma3GGUFLiteralMetaspace).
func FuzzGemma3GGUFMatchesJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add("<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n")
	f.Add("  \t\n\n   x   <unused3>[multimodal]<0x41>")
	gg, err := Load(testenv.DataFile(f, "gemma3-270m/gemma-3-270m-q4_k_m.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	js, err := Load(filepath.Dir(testenv.DataFile(f, "tokenizers/gemma3/tokenizer.json")))
	if err != nil {
		f.Fatal(err)
	}
	js.Truncation, js.Padding = nil, nil
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "▁") {
			return
		}
		a, err1 := gg.Encode(s, true)
		b, err2 := js.Encode(s, true)
		if err1 != nil || err2 != nil {
			t.Fatalf("gguf: %v, tokenizer.json: %v", err1, err2)
		}
		if !slices.Equal(a, b) {
			t.Fatalf("Encode(%q): gguf %v, tokenizer.json %v", s, a, b)
		}
		if da, db := gg.Decode(a, false), js.Decode(b, false); da != db {
			t.Fatalf("Decode: gguf %q, tokenizer.json %q", da, db)
		}
	})
}

// TestGemma3GGUFLiteralMetaspace pins the GGUF tokenizer to llama.cpp's ids
// (llama-cpp-python 0.3.36, tokenize(add_bos=True, special=True)) on text
// holding "▁" itself, where tokenizer.json differs (it matches "▁▁" as an
// added token: "x  ▁▁ y" is x ▁▁ ▁▁ ▁y there).
func TestGemma3GGUFLiteralMetaspace(t *testing.T) {
	gg, err := Load(testenv.DataFile(t, "gemma3-270m/gemma-3-270m-q4_k_m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		ids  []int32
	}{
		{"x  ▁▁ y", []int32{2, 236781, 138, 236743, 236743, 570}},
		{"x ▁ y", []int32{2, 236781, 236743, 236743, 570}},
		{"x▁▁y", []int32{2, 236781, 236743, 570}},
		{"  \t\n\n   x  ▁▁ <unused3>[multimodal]<0x41>", []int32{2, 138, 255968, 108, 139, 236781, 138, 236743, 236743, 236743, 9, 5, 236820, 236771, 236781, 236812, 236770, 236813}},
	} {
		got, err := gg.Encode(tc.text, true)
		if err != nil || !slices.Equal(got, tc.ids) {
			t.Errorf("Encode(%q) = %v, %v; llama.cpp %v", tc.text, got, err, tc.ids)
		}
	}
}
