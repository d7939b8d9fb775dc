package server

import (
	"bytes"
	"encoding/json"

	"github.com/mlxgo/mlxgo/mlx"
)

// constraint is the grammar a request asks generation to follow (structured
// output): a kind the engine reads (mlx.GrammarJSONSchema, ...), its source,
// and what the request said, as the execution composition records it.
type constraint struct {
	kind   string
	source string
	what   string // "json_object", "json_schema:NAME", ...
}

// jsonObjectSchema is response_format {"type": "json_object"}: any JSON object.
const jsonObjectSchema = `{"type":"object"}`

// decodeResponseFormat reads OpenAI's response_format: "text" (or absent)
// is no constraint; "json_object" is any object; "json_schema" is
// {json_schema: {name, schema, strict}}. strict is honoured either way: the
// grammar holds the output to the schema, and a schema the engine cannot
// enforce is a 400 naming what it cannot (never a looser schema).
func decodeResponseFormat(raw json.RawMessage) (*constraint, error) {
	if isNull(raw) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return nil, invalidf("response_format", `response_format must be an object such as {"type": "json_object"}`)
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &constraint{kind: mlx.GrammarJSONSchema, source: jsonObjectSchema, what: "json_object"}, nil
	case "json_schema":
		if f.JSONSchema == nil {
			return nil, invalidf("response_format.json_schema", "response_format of type json_schema needs json_schema: {name, schema}")
		}
		s := bytes.TrimSpace(f.JSONSchema.Schema)
		if len(s) == 0 || isNull(s) {
			return nil, invalidf("response_format.json_schema.schema", "response_format.json_schema.schema is required")
		}
		if s[0] != '{' && !bytes.Equal(s, []byte("true")) && !bytes.Equal(s, []byte("false")) {
			return nil, invalidf("response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON Schema object")
		}
		name := f.JSONSchema.Name
		if name == "" {
			name = "schema"
		}
		return &constraint{kind: mlx.GrammarJSONSchema, source: string(s), what: "json_schema:" + name}, nil
	default:
		return nil, invalidf("response_format.type", `response_format.type must be "text", "json_object" or "json_schema", not %q`, f.Type)
	}
}
