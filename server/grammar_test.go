package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeResponseFormat(t *testing.T) {
	for _, tc := range []struct {
		name, body, what, source, err string
	}{
		{name: "absent", body: `null`},
		{name: "text", body: `{"type":"text"}`},
		{name: "json_object", body: `{"type":"json_object"}`, what: "json_object", source: jsonObjectSchema},
		{name: "json_schema", body: `{"type":"json_schema","json_schema":{"name":"pet","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}}}}}`,
			what: "json_schema:pet", source: `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{name: "unnamed", body: `{"type":"json_schema","json_schema":{"schema":true}}`, what: "json_schema:schema", source: `true`},
		{name: "no schema", body: `{"type":"json_schema","json_schema":{"name":"x"}}`, err: "response_format.json_schema.schema"},
		{name: "no json_schema", body: `{"type":"json_schema"}`, err: "needs json_schema"},
		{name: "schema not object", body: `{"type":"json_schema","json_schema":{"schema":[1]}}`, err: "must be a JSON Schema object"},
		{name: "unknown type", body: `{"type":"yaml"}`, err: `not "yaml"`},
		{name: "not object", body: `"json"`, err: "must be an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := decodeResponseFormat(json.RawMessage(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.what == "" {
				if c != nil {
					t.Fatalf("constraint %+v for %s", c, tc.body)
				}
				return
			}
			if c == nil || c.what != tc.what || c.source != tc.source {
				t.Fatalf("got %+v, want what %q source %q", c, tc.what, tc.source)
			}
		})
	}
}

func TestDecodeTextFormat(t *testing.T) {
	c, err := decodeTextFormat(json.RawMessage(`{"type":"json_schema","name":"pet","schema":{"type":"object"},"strict":true}`))
	if err != nil || c == nil || c.what != "json_schema:pet" || c.source != `{"type":"object"}` || c.param != "text.format" {
		t.Fatalf("json_schema: %+v %v", c, err)
	}
	if c, err := decodeTextFormat(json.RawMessage(`{"type":"text"}`)); c != nil || err != nil {
		t.Fatalf("text: %+v %v", c, err)
	}
	_, err = decodeTextFormat(json.RawMessage(`{"type":"json_schema","name":"x"}`))
	if e, ok := err.(*apiError); !ok || e.param != "text.format.schema" {
		t.Fatalf("no schema: %v", err)
	}
	_, err = decodeTextFormat(json.RawMessage(`{"type":"xml"}`))
	if e, ok := err.(*apiError); !ok || e.param != "text.format.type" {
		t.Fatalf("xml: %#v", err)
	}
}
