package tok

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Config is what tokenizer_config.json says about a tokenizer beyond
// tokenizer.json: the chat templates, the special token strings, and
// whether BOS/EOS are added. A GGUF file fills the same fields from its
// tokenizer.* metadata.
type Config struct {
	// ChatTemplate is the default template; ChatTemplates holds named ones
	// (a list of {name, template} in tokenizer_config.json), "default" included.
	ChatTemplate  string
	ChatTemplates map[string]string

	BOS, EOS, PAD, UNK string

	// AddBOS and AddEOS are nil when the config does not say.
	AddBOS, AddEOS *bool

	// ModelMaxLength is 0 when absent; huge sentinel values (1e30) clamp to MaxInt.
	ModelMaxLength int

	// CleanUpSpaces is clean_up_tokenization_spaces (transformers applies it in decode).
	CleanUpSpaces bool
}

type configJSON struct {
	ChatTemplate   json.RawMessage `json:"chat_template"`
	BOS            json.RawMessage `json:"bos_token"`
	EOS            json.RawMessage `json:"eos_token"`
	PAD            json.RawMessage `json:"pad_token"`
	UNK            json.RawMessage `json:"unk_token"`
	AddBOS         *bool           `json:"add_bos_token"`
	AddEOS         *bool           `json:"add_eos_token"`
	ModelMaxLength json.Number     `json:"model_max_length"`
	CleanUp        *bool           `json:"clean_up_tokenization_spaces"`
}

// ParseConfig parses tokenizer_config.json.
func ParseConfig(data []byte) (Config, error) {
	var j configJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&j); err != nil {
		return Config{}, fmt.Errorf("cannot parse tokenizer_config.json: %w", err)
	}
	c := Config{AddBOS: j.AddBOS, AddEOS: j.AddEOS}
	var err error
	for _, f := range []struct {
		dst  *string
		raw  json.RawMessage
		name string
	}{{&c.BOS, j.BOS, "bos_token"}, {&c.EOS, j.EOS, "eos_token"}, {&c.PAD, j.PAD, "pad_token"}, {&c.UNK, j.UNK, "unk_token"}} {
		if *f.dst, err = tokenString(f.raw); err != nil {
			return Config{}, fmt.Errorf("cannot parse tokenizer_config.json %s: %w", f.name, err)
		}
	}
	if c.ChatTemplate, c.ChatTemplates, err = chatTemplates(j.ChatTemplate); err != nil {
		return Config{}, fmt.Errorf("cannot parse tokenizer_config.json chat_template: %w", err)
	}
	if j.ModelMaxLength != "" {
		f, err := j.ModelMaxLength.Float64()
		if err != nil {
			return Config{}, fmt.Errorf("cannot parse tokenizer_config.json model_max_length: %w", err)
		}
		switch {
		case f >= math.MaxInt:
			c.ModelMaxLength = math.MaxInt
		case f > 0:
			c.ModelMaxLength = int(f)
		}
	}
	if j.CleanUp != nil {
		c.CleanUpSpaces = *j.CleanUp
	}
	return c, nil
}

// tokenString reads a special token given as a string, an AddedToken dict
// ({"content": ...}) or null.
func tokenString(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var d struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || d.Content == nil {
		return "", fmt.Errorf("want a string or {\"content\": ...}, got %.40s", raw)
	}
	return *d.Content, nil
}

// chatTemplates reads a template string or a list of {name, template}; the
// default is the one named "default", as in transformers.
func chatTemplates(raw json.RawMessage) (string, map[string]string, error) {
	if isNull(raw) {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", nil, fmt.Errorf("want a string or a list of {name, template}")
	}
	named := map[string]string{}
	for _, t := range list {
		named[t.Name] = t.Template
	}
	return named["default"], named, nil
}

// EOSIDs is the id of the EOS token that tokenizer_config.json (or GGUF
// metadata) names, as a list of zero or one ids.
func (t *Tokenizer) EOSIDs() []int32 {
	if name := t.config.EOS; name != "" {
		if id, ok := t.TokenToID(name); ok {
			return []int32{id}
		}
	}
	return nil
}
