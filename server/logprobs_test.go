package server

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
)

func TestJSONLogprob(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want float64
	}{
		{"zero", 0, 0},
		{"shortest float32 decimal", -0.1, -0.1},
		{"exact", -1.5, -1.5},
		{"ruled out", float32(math.Inf(-1)), -9999},
		{"nan", float32(math.NaN()), -9999},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := jsonLogprob(tc.in); got != tc.want {
				t.Errorf("jsonLogprob(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestTokenText(t *testing.T) {
	tk := testTokenizer(t)
	id := func(s string) int32 {
		v, ok := tk.TokenToID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return v
	}
	cases := []struct {
		name  string
		id    int32
		text  string
		bytes []byte
	}{
		{"word with space", id("Ġthe"), " the", []byte(" the")},
		{"added token", id("<think>"), "<think>", []byte("<think>")},
		// Â is byte 0xC2 in GPT-2's alphabet: the first half of a character.
		{"partial character", id("Â"), `bytes:\xc2`, []byte{0xc2}},
		{"whole two-byte character", id("Â°"), "°", []byte("°")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, b := tokenText(tk, tc.id)
			if s != tc.text || string(b) != string(tc.bytes) {
				t.Errorf("token %d: %q %v, want %q %v", tc.id, s, b, tc.text, tc.bytes)
			}
		})
	}
}

func TestByteLevelByteInverts(t *testing.T) {
	// GPT-2's table: 188 printable bytes map to themselves, the other 68
	// to U+0100..U+0143; every byte appears exactly once.
	seen := map[byte]bool{}
	for r := rune(0); r < 0x200; r++ {
		if b, ok := byteLevelByte(r); ok {
			if seen[b] {
				t.Fatalf("byte %#x twice", b)
			}
			seen[b] = true
		}
	}
	if len(seen) != 256 {
		t.Fatalf("%d bytes covered, want 256", len(seen))
	}
	if b, ok := byteLevelByte('Ġ'); !ok || b != ' ' {
		t.Errorf("Ġ is %#x, want a space", b)
	}
}

func TestLogprobShapes(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode("Hé!", false)
	var items []gen.Logprob
	for i, id := range ids {
		items = append(items, fakeLogprob(id, i, 4))
	}
	items[0].Logprob = float32(math.Inf(-1))

	chat := chatLogprobs(tk, items, 2)
	b, err := json.Marshal(chat)
	if err != nil {
		t.Fatalf("chat logprobs do not encode: %v", err)
	}
	var c struct {
		Content []chatLogprobEntry
		Refusal *string
	}
	json.Unmarshal(b, &c)
	var text []byte
	for _, e := range c.Content {
		text = append(text, toBytes(e.Bytes)...)
		if len(e.TopLogprobs) != 2 {
			t.Errorf("%d alternatives, want 2", len(e.TopLogprobs))
		}
	}
	if string(text) != "Hé!" || c.Content[0].Logprob != -9999 || len(c.Content) != len(ids) {
		t.Errorf("chat logprobs %s", b)
	}

	// The legacy shape carries offsets on across a stream's chunks.
	l := &legacyLogprobs{t: tk, top: 1}
	first, second := l.format(items[:1]), l.format(items[1:])
	offsets := append(first["text_offset"].([]int), second["text_offset"].([]int)...)
	want := []int{0}
	for i := 1; i < len(ids); i++ {
		want = append(want, len([]rune(tk.Decode(ids[:i], false))))
	}
	if len(offsets) != len(want) {
		t.Fatalf("offsets %v, want %v", offsets, want)
	}
	for i := range want {
		if offsets[i] != want[i] {
			t.Fatalf("offsets %v, want %v", offsets, want)
		}
	}
	if tops := second["top_logprobs"].([]map[string]float64); len(tops[0]) != 1 {
		t.Errorf("legacy top %v, want one alternative", tops)
	}
}

func toBytes(v []int) []byte {
	out := make([]byte, len(v))
	for i, x := range v {
		out[i] = byte(x)
	}
	return out
}

func TestLogprobLogTake(t *testing.T) {
	var l logprobLog
	l.add(gen.Logprob{Token: 1})
	l.add(gen.Logprob{Token: 2})
	if got := l.take(); len(got) != 2 || got[1].Token != 2 {
		t.Fatalf("first take %v", got)
	}
	if got := l.take(); len(got) != 0 {
		t.Fatalf("second take %v, want nothing new", got)
	}
	l.add(gen.Logprob{Token: 3})
	if got := l.take(); len(got) != 1 || got[0].Token != 3 {
		t.Fatalf("third take %v", got)
	}
}

// TestLogprobsSmolLM2: on the real model, greedy chat logprobs list one
// entry per generated token, the chosen token is the most likely one, the
// tokens spell the content, and every value is a log-probability.
func TestLogprobsSmolLM2(t *testing.T) {
	m, tk := smollm2(t)
	url, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 0)})
	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Name a colour."}],"max_tokens":4,"temperature":0,"logprobs":true,"top_logprobs":3}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct{ Content []chatLogprobEntry }
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	lp := r.Choices[0].Logprobs.Content
	if len(lp) != r.Usage.CompletionTokens || len(lp) == 0 {
		t.Fatalf("%d logprobs for %d tokens: %s", len(lp), r.Usage.CompletionTokens, b)
	}
	var text string
	for _, e := range lp {
		text += e.Token
		if e.Logprob > 0 || len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob {
			t.Errorf("entry %+v: want the greedy token first among 3 alternatives", e)
		}
		for i := 1; i < len(e.TopLogprobs); i++ {
			if e.TopLogprobs[i].Logprob > e.TopLogprobs[i-1].Logprob {
				t.Errorf("alternatives out of order: %+v", e.TopLogprobs)
			}
		}
	}
	if text != r.Choices[0].Message.Content {
		t.Errorf("tokens spell %q, content %q", text, r.Choices[0].Message.Content)
	}
}
