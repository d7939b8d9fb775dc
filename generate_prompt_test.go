package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/tok"
)

// TestEncodePrompt: the prompt mlx_lm.generate would build — the chat
// template with an optional system message and template variables, or the
// raw text with the tokenizer's special tokens — checked on Qwen3's template.
func TestEncodePrompt(t *testing.T) {
	dir := filepath.Dir(testenv.DataFile(t, filepath.Join("tokenizers", "qwen3", "tokenizer.json")))
	tk, err := tok.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const user = "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n"
	for _, tc := range []struct {
		name string
		f    generateFlags
		want string
	}{
		{"chat", generateFlags{}, user},
		{"system", generateFlags{system: "Be brief."}, "<|im_start|>system\nBe brief.<|im_end|>\n" + user},
		{"no think", generateFlags{noThink: true}, user + "<think>\n\n</think>\n\n"},
		{"template kwargs", generateFlags{kwargs: `{"enable_thinking": false}`}, user + "<think>\n\n</think>\n\n"},
		{"raw", generateFlags{raw: true}, "Why is the sky blue?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := encodePrompt(tk, &tc.f, "Why is the sky blue?", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := tk.Decode(ids, false); got != tc.want {
				t.Fatalf("prompt %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := encodePrompt(tk, &generateFlags{kwargs: `[1]`}, "x", io.Discard); err == nil {
		t.Fatal("--template-kwargs that is not an object was accepted")
	}
}

// cancelWriter cancels a context on the first write: Ctrl-C as soon as the
// first token has been printed.
type cancelWriter struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.cancel()
	return w.Buffer.Write(p)
}

// WriteString shadows bytes.Buffer's, which io.WriteString would call.
func (w *cancelWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// TestGenerateInterrupt: a cancelled context (Ctrl-C) stops generation at the
// next token, keeps what was printed, ends the line, and exits 130.
func TestGenerateInterrupt(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	gguf := testenv.DataFile(t, filepath.Join("smollm2", DefaultModelFile))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelWriter{cancel: cancel}
	var stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: out, Stderr: &stderr}
	code := m.Run(ctx, []string{"generate", "-m", gguf, "--max-tokens", "50", "-p", "Write a haiku about the sea"})
	if code != 130 || !strings.Contains(stderr.String(), "mlxgo: interrupted") {
		t.Fatalf("exit %d, stderr %q; want 130 and 'interrupted'", code, stderr.String())
	}
	got := out.String()
	if !strings.HasPrefix("In the depths of the ocean", strings.TrimSuffix(got, "\n")) || !strings.HasSuffix(got, "\n") || len(got) < 2 {
		t.Fatalf("stdout %q: want the first token(s) of the reply and a newline", got)
	}
}
