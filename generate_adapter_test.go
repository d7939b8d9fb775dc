package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// TestGenerateAdapterMatchesMLXLM: `mlxgo generate --adapter-path` prints,
// byte for byte, the text mlx_lm.generate --adapter-path produced with the
// same LoRA adapter on the same SmolLM2 weights, and with --fuse-adapter
// the text of the model mlx_lm.fuse makes (recorded by
// models/testdata/oracle/lora.py); bad adapter flags are one error line.
func TestGenerateAdapterMatchesMLXLM(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	root := oracleDir()
	data, err := os.ReadFile(filepath.Join(root, "lora", "index.json"))
	if err != nil {
		testenv.Missing(t, "the adapter fixtures of lora.py", "make oracle")
	}
	var index struct {
		Generate *struct {
			Model      string `json:"model"`
			Adapter    string `json:"adapter"`
			PromptText string `json:"prompt_text"`
			Text       string `json:"text"`
			FusedText  string `json:"fused_text"`
			BaseText   string `json:"base_text"`
			MaxTokens  int    `json:"max_tokens"`
		} `json:"generate"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatalf("cannot parse the adapter index: %v", err)
	}
	g := index.Generate
	if g == nil {
		testenv.Missing(t, "lora.py's SmolLM2 generate text", "make oracle (smollm2_gguf.py, then lora.py)")
	}
	model, adapter := filepath.Join(root, g.Model), filepath.Join(root, g.Adapter)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
		code := m.Run(context.Background(), append([]string{"generate", "-m", model, "--max-tokens", strconv.Itoa(g.MaxTokens), "-p", g.PromptText}, args...))
		return code, stdout.String(), stderr.String()
	}
	// The same weights as the default model's GGUF file (smollm2_gguf.py
	// converts it): the adapter applies to it alike.
	gguf := testenv.DataFile(t, filepath.Join("smollm2", DefaultModelFile))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unfused", []string{"--adapter-path", adapter, "--verbose"}, g.Text},
		{"fused", []string{"--adapter-path", adapter, "--fuse-adapter"}, g.FusedText},
		{"none", nil, g.BaseText},
		{"gguf", []string{"-m", gguf, "--adapter-path", adapter}, g.Text},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if out != tc.want+"\n" {
				t.Fatalf("got %q\nwant %q (mlx_lm.generate)", out, tc.want+"\n")
			}
			if tc.name == "unfused" && !strings.Contains(errOut, "adapter:     smollm2-chat ("+adapter+", lora, unfused)") {
				t.Errorf("--verbose does not name the adapter:\n%s", errOut)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no such directory", []string{"--adapter-path", filepath.Join(t.TempDir(), "nope")}, 1, "mlxgo: error: cannot load model " + model + ": cannot open adapter nope: "},
		{"not an adapter", []string{"--adapter-path", model}, 1, "has no adapter_config.json"},
		{"fuse without adapter", []string{"--fuse-adapter"}, 2, "--fuse-adapter fuses one adapter; 0 given"},
		{"two adapters", []string{"--adapter-path", adapter, "--adapter-path", adapter}, 2, "generate applies one adapter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(tc.args...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.err) || !strings.HasPrefix(lines[0], "mlxgo: error: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and one error line with %q", code, out, errOut, tc.code, tc.err)
			}
		})
	}
}
