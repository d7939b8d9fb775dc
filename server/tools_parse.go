package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The parsers read the text a model wrote between its tool-call markers.
// A parser error means the text is not a call (often: generation stopped
// mid-call); the caller then shows the text as plain content, so nothing the
// model wrote is lost and nothing malformed is passed off as a call.

var errNotToolCall = errors.New("the text is not a tool call")

// parseJSONTools reads json_tools' {"name": ..., "arguments": {...}} (or a
// list of them), the format of Qwen2.5/Qwen3/Hermes-style templates.
func parseJSONTools(text string, _ []toolDef) ([]toolCall, error) {
	var v json.RawMessage
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &v); err != nil {
		return nil, fmt.Errorf("cannot parse tool call JSON: %w", err)
	}
	items := []json.RawMessage{v}
	if v[0] == '[' {
		if err := json.Unmarshal(v, &items); err != nil || len(items) == 0 {
			return nil, errNotToolCall
		}
	}
	calls := make([]toolCall, 0, len(items))
	for _, it := range items {
		var c struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			ID        *string         `json:"id"`
		}
		if len(it) == 0 || it[0] != '{' || json.Unmarshal(it, &c) != nil || c.Name == nil || *c.Name == "" {
			return nil, errNotToolCall
		}
		args, err := argumentsJSON(c.Arguments)
		if err != nil {
			return nil, err
		}
		call := toolCall{Name: *c.Name, Arguments: args}
		if c.ID != nil {
			// mlx-lm prefers the model's own id over a fresh one.
			call.ID = *c.ID
		}
		calls = append(calls, call)
	}
	return calls, nil
}

// argumentsJSON turns a call's arguments into OpenAI's JSON-object string:
// an object is compacted (key order kept), a string holding an object is
// taken as that object, absent is {}. Anything else is not a call.
func argumentsJSON(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", errNotToolCall
		}
		raw = bytes.TrimSpace([]byte(s))
	}
	if len(raw) == 0 || raw[0] != '{' {
		return "", fmt.Errorf("%w: arguments must be a JSON object", errNotToolCall)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("cannot parse tool call arguments: %w", err)
	}
	return buf.String(), nil
}

// parseQwen3Coder reads Qwen3-Coder's XML-ish calls:
//
//	<function=NAME>
//	<parameter=P>
//	VALUE
//	</parameter>
//	</function>
//
// Parameter values are text; the tool's JSON schema says how to type them
// (as mlx-lm's qwen3_coder parser does).
func parseQwen3Coder(text string, tools []toolDef) ([]toolCall, error) {
	i := strings.Index(text, "<function=")
	// mlx-lm's regex anchors the function's end at the end of the text
	// (a trailing newline allowed).
	body, ok := strings.CutSuffix(strings.TrimRight(text, "\n"), "</function>")
	if i < 0 || !ok || len(body) < i+len("<function=") {
		return nil, errNotToolCall
	}
	body = body[i+len("<function="):]
	name, rest, ok := cutName(body)
	if !ok {
		return nil, errNotToolCall
	}
	types := paramTypes(name, tools)
	args := newOrderedObject()
	for {
		j := strings.Index(rest, "<parameter=")
		if j < 0 {
			break
		}
		rest = rest[j+len("<parameter="):]
		k := strings.Index(rest, "</parameter>")
		if k < 0 {
			break
		}
		inner := rest[:k]
		rest = rest[k+len("</parameter>"):]
		pname, value, ok := cutName(inner)
		if !ok {
			continue
		}
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		args.set(pname, qwenValue(value, types, pname))
	}
	return []toolCall{{Name: name, Arguments: args.String()}}, nil
}

// cutName reads "NAME>" (whitespace before the name allowed, the ">"
// optional) the way mlx-lm's name regex \s*([^\s<>]+)>? does.
func cutName(s string) (name, rest string, ok bool) {
	t := strings.TrimLeft(s, " \t\r\n\f\v")
	n := strings.IndexAny(t, " \t\r\n\f\v<>")
	if n < 0 {
		n = len(t)
	}
	if n == 0 {
		return "", "", false
	}
	name, rest = t[:n], t[n:]
	rest = strings.TrimPrefix(rest, ">")
	return name, rest, true
}

// paramTypes maps a tool's parameter names to their schema type names.
func paramTypes(name string, tools []toolDef) map[string]string {
	out := map[string]string{}
	for _, d := range tools {
		if d.Function == nil || d.Function.Name != name || d.Function.Parameters == nil {
			continue
		}
		for p, s := range d.Function.Parameters.Properties {
			t, _ := s.Type.(string)
			if s.Type == nil {
				t = "?" // present without a type: JSON containers are decoded
			}
			out[p] = strings.ToLower(strings.TrimSpace(t))
		}
		break
	}
	return out
}

// qwenValue types a parameter's text by its schema type: strings stay text,
// numbers and booleans are converted, objects and arrays are decoded; a
// value that does not convert stays text (mlx-lm does the same, except that
// it raises for a non-integer "integer", which here stays text too).
func qwenValue(v string, types map[string]string, name string) json.RawMessage {
	text := func() json.RawMessage { b, _ := json.Marshal(v); return b }
	if strings.EqualFold(v, "null") {
		return json.RawMessage("null")
	}
	t, ok := types[name]
	if !ok {
		return text()
	}
	switch {
	case t == "?":
		if s := strings.TrimSpace(v); json.Valid([]byte(s)) && (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) {
			return compactJSON(s)
		}
		return text()
	case t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum":
		return text()
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "long") || strings.HasPrefix(t, "short") || strings.HasPrefix(t, "unsigned"):
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
			return text()
		}
		return json.RawMessage(strconv.FormatFloat(f, 'f', -1, 64))
	case strings.HasPrefix(t, "num") || strings.HasPrefix(t, "float"):
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return text()
		}
		return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
	case t == "boolean" || t == "bool" || t == "binary":
		return json.RawMessage(strconv.FormatBool(strings.EqualFold(v, "true")))
	default:
		if s := strings.TrimSpace(v); json.Valid([]byte(s)) {
			return compactJSON(s)
		}
		return text()
	}
}

func compactJSON(s string) json.RawMessage {
	var buf bytes.Buffer
	json.Compact(&buf, []byte(s))
	return buf.Bytes()
}

// orderedObject builds a JSON object in insertion order; a repeated key
// keeps its first place and its last value, as a Python dict does.
type orderedObject struct {
	keys []string
	vals map[string]json.RawMessage
}

func newOrderedObject() *orderedObject { return &orderedObject{vals: map[string]json.RawMessage{}} }

func (o *orderedObject) set(k string, v json.RawMessage) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *orderedObject) String() string {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(o.vals[k])
	}
	buf.WriteByte('}')
	return buf.String()
}
