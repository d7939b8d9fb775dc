package tok

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTemplateFiles(t *testing.T) {
	const tokJSON = `{"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`
	tests := []struct {
		name        string
		config      string            // tokenizer_config.json
		files       map[string]string // relative path → content
		wantDefault string
		wantNamed   map[string]string
	}{
		{name: "config only", config: `{"chat_template":"from config"}`, wantDefault: "from config"},
		{name: "jinja file wins over config", config: `{"chat_template":"from config"}`,
			files: map[string]string{"chat_template.jinja": "from file"}, wantDefault: "from file"},
		{name: "jinja file without config", files: map[string]string{"chat_template.jinja": "from file"}, wantDefault: "from file"},
		{name: "named templates replace the config's", config: `{"chat_template":[{"name":"default","template":"cfg"},{"name":"rag","template":"cfg rag"}]}`,
			files:       map[string]string{"chat_template.jinja": "file", "additional_chat_templates/tool_use.jinja": "file tools"},
			wantDefault: "file", wantNamed: map[string]string{"default": "file", "tool_use": "file tools"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"tokenizer.json": tokJSON}
			if tc.config != "" {
				files["tokenizer_config.json"] = tc.config
			}
			for k, v := range tc.files {
				files[k] = v
			}
			for name, content := range files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tk, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg := tk.Config()
			if cfg.ChatTemplate != tc.wantDefault {
				t.Errorf("ChatTemplate = %q, want %q", cfg.ChatTemplate, tc.wantDefault)
			}
			if tc.wantNamed != nil {
				if len(cfg.ChatTemplates) != len(tc.wantNamed) {
					t.Fatalf("ChatTemplates = %v, want %v", cfg.ChatTemplates, tc.wantNamed)
				}
				for k, v := range tc.wantNamed {
					if cfg.ChatTemplates[k] != v {
						t.Errorf("ChatTemplates[%q] = %q, want %q", k, cfg.ChatTemplates[k], v)
					}
				}
			}
		})
	}
}
