package tok

import (
	"encoding/json"
	"strings"
	"testing"
)

// tinyByteLevel is a byte-level BPE over the 256 byte characters plus two
// merges and one special token: enough to exercise the pipeline without data.
func tinyByteLevel(t testing.TB) *Tokenizer {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[byteToStr[b]] = b
	}
	vocab["he"] = 256
	vocab["hel"] = 257
	js, _ := json.Marshal(map[string]any{
		"added_tokens":   []any{map[string]any{"id": 258, "content": "<|end|>", "special": true}},
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel"},
		"post_processor": nil,
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"h e", "he l"}},
	})
	tk, err := FromJSON(js)
	if err != nil {
		t.Fatalf("cannot build tiny tokenizer: %v", err)
	}
	return tk
}

func TestTinyEncode(t *testing.T) {
	tk := tinyByteLevel(t)
	cases := []struct {
		name string
		text string
		want []int32
	}{
		{"merges", "hello", []int32{257, 'l', 'o'}},
		{"special", "he<|end|>x", []int32{256, 258, 'x'}},
		{"space", " he", []int32{byteToRuneID(' '), 256}},
		{"empty", "", []int32{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tk.Encode(tc.text, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
				}
			}
			if dec := tk.Decode(got, false); dec != tc.text {
				t.Fatalf("Decode = %q, want %q", dec, tc.text)
			}
		})
	}
}

// byteToRuneID is the tiny vocabulary's id for a byte (its own value).
func byteToRuneID(b byte) int32 { return int32(b) }

func TestGPTPatterns(t *testing.T) {
	cases := []struct {
		name, pattern, text string
		want                []string
	}{
		{"gpt2 words", gpt2Regex, "Hello world's  end", []string{"Hello", " world", "'s", " ", " end"}},
		{"gpt2 trailing space", gpt2Regex, "a  ", []string{"a", "  "}},
		{"gpt2 digits", gpt2Regex, "x 123", []string{"x", " 123"}},
		{"llama3 digits", llama3Regex, "12345", []string{"123", "45"}},
		{"qwen digits", qwen2Regex, "123", []string{"1", "2", "3"}},
		{"llama3 case-insensitive contraction", llama3Regex, "I'LL go", []string{"I", "'LL", " go"}},
		{"llama3 newlines", llama3Regex, "a \n\n b", []string{"a", " \n\n", " b"}},
		{"llama3 punct newline", llama3Regex, "x.\n\ny", []string{"x", ".\n\n", "y"}},
		{"llama3 prefix char", llama3Regex, "(hello", []string{"(hello"}},
		{"space before digit", llama3Regex, "a 1", []string{"a", " ", "1"}},
		{"unicode space", llama3Regex, "a\u3000\u3000b", []string{"a", "\u3000", "\u3000b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range knownPatterns[tc.pattern].find(tc.text, nil) {
				got = append(got, tc.text[s.start:s.end])
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("split(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestLossyUTF8(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"valid", []byte("héllo"), "héllo"},
		{"truncated three-byte", []byte{0xE2, 0x82, 'a'}, "\uFFFDa"},
		{"lone continuation", []byte{0x80, 0x80}, "\uFFFD\uFFFD"},
		{"surrogate", []byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{"truncated four-byte at end", []byte{'x', 0xF0, 0x9F, 0x98}, "x\uFFFD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lossyUTF8(tc.in); got != tc.want {
				t.Fatalf("lossyUTF8(%x) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, json, want string
	}{
		{"malformed", `{"model":`, "cannot parse tokenizer.json"},
		{"unknown normalizer", `{"normalizer":{"type":"Precompiled"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, `unsupported normalizer "Precompiled"`},
		{"unknown model", `{"model":{"type":"Unigram","vocab":[]}}`, `unsupported model "Unigram"`},
		{"lookahead regex", `{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"a(?=b)"},"behavior":"Isolated"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, "unsupported split regex"},
		{"bad merge", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}`, "not in the vocabulary"},
		{"no model", `{}`, "no model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromJSON([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromJSON error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"bos_token":{"content":"<s>","lstrip":false},"eos_token":"</s>","pad_token":null,
		"add_bos_token":true,"model_max_length":1000000000000000019884624838656,
		"chat_template":[{"name":"default","template":"D"},{"name":"tool_use","template":"T"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BOS != "<s>" || cfg.EOS != "</s>" || cfg.PAD != "" || cfg.AddBOS == nil || !*cfg.AddBOS || cfg.AddEOS != nil {
		t.Fatalf("special tokens parsed wrong: %+v", cfg)
	}
	if cfg.ChatTemplate != "D" || cfg.ChatTemplates["tool_use"] != "T" {
		t.Fatalf("chat templates parsed wrong: %+v", cfg)
	}
	if cfg.ModelMaxLength <= 1<<40 {
		t.Fatalf("model_max_length = %d, want a clamped huge value", cfg.ModelMaxLength)
	}
}

// TestMergeHeapMatchesLinear checks that the two merge strategies agree.
func TestMergeHeapMatchesLinear(t *testing.T) {
	tk := tinyByteLevel(t)
	bpe := tk.model.(*BPE)
	for _, s := range []string{"hhhhheeeellll", strings.Repeat("hel", 40), "xhehelhe"} {
		a := bpe.mergeAll(append([]int32(nil), mustSyms(t, bpe, s)...))
		b := bpe.mergeHeap(append([]int32(nil), mustSyms(t, bpe, s)...))
		if len(a) != len(b) {
			t.Fatalf("%q: linear %v heap %v", s, a, b)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%q: linear %v heap %v", s, a, b)
			}
		}
	}
}

func mustSyms(t *testing.T, m *BPE, s string) []int32 {
	syms, err := m.initialSymbols(s)
	if err != nil {
		t.Fatal(err)
	}
	return syms
}
