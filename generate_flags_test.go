package main

import (
	"io"
	"strings"
	"testing"
)

// TestGenerateFlagAliases: mlx-lm's spellings (--system-prompt,
// --temperature) set the same values as mlxgo's, and -p - reads the prompt
// from stdin as mlx_lm.generate does.
func TestGenerateFlagAliases(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		args        []string
		prompt      string
		system      string
		temp        float64
	}{
		{"-p text", "", []string{"-p", "hi"}, "hi", "", 0},
		{"-p - reads stdin", "from stdin\n", []string{"-p", "-"}, "from stdin", "", 0},
		{"--prompt - reads stdin", "piped", []string{"--prompt", "-"}, "piped", "", 0},
		{"no -p reads stdin", "piped\n", nil, "piped", "", 0},
		{"--system-prompt", "", []string{"-p", "hi", "--system-prompt", "Be brief."}, "hi", "Be brief.", 0},
		{"--temperature", "", []string{"-p", "hi", "--temperature", "0.7"}, "hi", "", 0.7},
		{"--temp", "", []string{"-p", "hi", "--temp", "0.3"}, "hi", "", 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &generateCommand{m: &Main{Stdin: strings.NewReader(tc.stdin), Stdout: io.Discard, Stderr: io.Discard}}
			f, err := c.parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			text, err := c.readPrompt(f)
			if err != nil {
				t.Fatal(err)
			}
			if text != tc.prompt || f.system != tc.system || f.sampler.Temp != tc.temp {
				t.Errorf("prompt %q system %q temp %g, want %q %q %g", text, f.system, f.sampler.Temp, tc.prompt, tc.system, tc.temp)
			}
		})
	}
	c := &generateCommand{m: &Main{Stdin: strings.NewReader("\n"), Stdout: io.Discard, Stderr: io.Discard}}
	f, err := c.parse([]string{"-p", "-"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.readPrompt(f); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("-p - with empty stdin: %v, want an empty-prompt error", err)
	}
}

// TestGenerateShardRefusesAdapters: a LoRA adapter is not split with the
// weights, so --shard with --adapter-path is a usage error before loading.
func TestGenerateShardRefusesAdapters(t *testing.T) {
	c := &generateCommand{m: &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	for _, kind := range []string{"tensor", "pipeline"} {
		_, err := c.parse([]string{"-p", "hi", "--shard", kind, "--adapter-path", "a"})
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "--adapter-path cannot be combined with --shard "+kind) {
			t.Errorf("--shard %s --adapter-path: %v, want a usage error", kind, err)
		}
	}
	if _, err := c.parse([]string{"-p", "hi", "--shard", "tensor"}); err != nil {
		t.Errorf("--shard tensor alone: %v", err)
	}
}
