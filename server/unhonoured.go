package server

import (
	"bytes"
	"encoding/json"
	"sort"
)

// The rule for request fields (README, "Request fields"): a field mlxgo
// reads is honoured or refused. A field that mlx_lm.server or OpenAI give
// a meaning mlxgo cannot honour is a 400 naming it (unsupported_parameter),
// unless its value asks for nothing (xtc_probability 0, parallel_tool_calls
// true): a client must never believe it got what it asked for. Any other
// field is unknown to mlxgo and ignored, so that clients which add fields
// of their own (user, metadata, store, ...) keep working.

// unhonouredField is a known field mlxgo cannot honour; noop reports whether
// a value asks for nothing (nil: only null does).
type unhonouredField struct {
	why  string
	noop func(raw json.RawMessage, body map[string]json.RawMessage) bool
}

var unhonoured = map[string]unhonouredField{
	// mlx_lm.server's own fields.
	"role_mapping": {"prompts are built by the model's chat template only", nil},
	// OpenAI's.
	"reasoning_effort":    {"the effort cannot be set; turn thinking off with chat_template_kwargs {\"enable_thinking\": false} where the template has it", nil},
	"verbosity":           {"output verbosity cannot be set", nil},
	"parallel_tool_calls": {"the number of tool calls per turn cannot be limited", isTrue},
	"functions":           {"the deprecated functions field is not read; use tools", isEmptyArray},
	"function_call":       {"the deprecated function_call field is not read; use tool_choice", nil},
	"audio":               {"audio output is not implemented", nil},
	"modalities":          {"only text output is implemented", isTextOnly},
	"prediction":          {"predicted outputs are not implemented", nil},
	"web_search_options":  {"web search is not implemented", nil},
	// Constrained decoding as other servers spell it.
	"guided_json":    {"constrained decoding is not implemented", nil},
	"guided_regex":   {"constrained decoding is not implemented", nil},
	"guided_choice":  {"constrained decoding is not implemented", nil},
	"guided_grammar": {"constrained decoding is not implemented", nil},
	"grammar":        {"constrained decoding is not implemented", nil},
	"json_schema":    {"constrained decoding is not implemented", nil},
}

// refuseUnhonoured is the 400 for the first (by name) field of body that
// mlxgo knows and cannot honour.
func refuseUnhonoured(data []byte) error { return refuseFields(data, unhonoured) }

// refuseFields is refuseUnhonoured over one API's table of fields.
func refuseFields(data []byte, unhonoured map[string]unhonouredField) error {
	var body map[string]json.RawMessage
	if json.Unmarshal(data, &body) != nil {
		return nil // the typed decode reports the syntax error
	}
	var names []string
	for k := range body {
		if _, ok := unhonoured[k]; ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		f, raw := unhonoured[k], body[k]
		if isNull(raw) || (f.noop != nil && f.noop(raw, body)) {
			continue
		}
		return unsupported(k, f.why)
	}
	return nil
}

func isZero(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var f float64
	return json.Unmarshal(raw, &f) == nil && f == 0
}

// isEmptyString also takes mlx_lm.server's placeholder for "none given".
func isEmptyString(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && (s == "" || s == "default_model")
}

func isTrue(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var b bool
	return json.Unmarshal(raw, &b) == nil && b
}

func isEmptyArray(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "[]"
}

func isTextOnly(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var m []string
	return json.Unmarshal(raw, &m) == nil && len(m) == 1 && m[0] == "text"
}
