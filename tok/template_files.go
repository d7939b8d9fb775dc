package tok

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Template files that transformers 5 saves beside tokenizer_config.json
// instead of its chat_template entry.
const (
	chatTemplateFile = "chat_template.jinja"
	chatTemplateDir  = "additional_chat_templates"
)

// readTemplateFiles applies dir's template files to cfg the way transformers'
// from_pretrained does: when any exist they replace the config's templates
// entirely; chat_template.jinja is "default", additional_chat_templates/NAME.jinja
// is NAME.
func readTemplateFiles(dir string, cfg *Config) error {
	named := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, chatTemplateFile))
	switch {
	case err == nil:
		named["default"] = string(b)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cannot read %s: %w", chatTemplateFile, err)
	}
	extra, _ := filepath.Glob(filepath.Join(dir, chatTemplateDir, "*.jinja"))
	sort.Strings(extra)
	for _, p := range extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", filepath.Join(chatTemplateDir, filepath.Base(p)), err)
		}
		named[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	if len(named) == 0 {
		return nil
	}
	cfg.ChatTemplate, cfg.ChatTemplates = named["default"], named
	if len(named) == 1 && cfg.ChatTemplate != "" {
		cfg.ChatTemplates = nil // a single template is a plain string in transformers too
	}
	return nil
}
