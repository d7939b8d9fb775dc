package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
		c, ok := readCall(it)
		if !ok {
			return nil, errNotToolCall
		}
		args, err := argumentsJSON(c.arguments)
		if err != nil {
			return nil, err
		}
		calls = append(calls, toolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	return calls, nil
}

// rawCall is a {"name", "arguments", "id"} object as a model wrote it.
type rawCall struct {
	name, id  string
	arguments json.RawMessage // nil: absent
}

// readCall reads a call object with exact key names (encoding/json would
// also take "NAME" for name; Python's dict does not). A call needs a
// non-empty string name; a string id is the model's own, which mlx-lm
// prefers over a fresh one.
func readCall(obj json.RawMessage) (rawCall, bool) {
	var m map[string]json.RawMessage
	if len(obj) == 0 || obj[0] != '{' || json.Unmarshal(obj, &m) != nil {
		return rawCall{}, false
	}
	var c rawCall
	if json.Unmarshal(m["name"], &c.name) != nil || c.name == "" {
		return rawCall{}, false
	}
	json.Unmarshal(m["id"], &c.id)
	c.arguments = m["arguments"]
	return c, true
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

// parseMistral reads Mistral's calls, which have no end marker: either a
// JSON list [{"name": ..., "arguments": {...}}, ...] or one or more
// "NAME[ARGS]{...}" headers each followed by its JSON arguments.
func parseMistral(text string, _ []toolDef) ([]toolCall, error) {
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(text), &list); err == nil {
		calls, err := mistralList(list)
		if err != nil || len(calls) > 0 {
			return calls, err
		}
	}
	var calls []toolCall
	for pos := 0; ; {
		name, end, ok := nextArgsHeader(text, pos)
		if !ok {
			break
		}
		dec := json.NewDecoder(strings.NewReader(text[end:]))
		var args json.RawMessage
		if err := dec.Decode(&args); err != nil {
			// The template always writes valid JSON: the call was cut short.
			return nil, fmt.Errorf("cannot parse tool call arguments: %w", err)
		}
		a, err := argumentsJSON(args)
		if err != nil {
			return nil, err
		}
		calls = append(calls, toolCall{Name: name, Arguments: a})
		pos = end + int(dec.InputOffset())
	}
	if len(calls) == 0 {
		return nil, errNotToolCall
	}
	return calls, nil
}

// mistralList reads the JSON-list form; a list that is JSON but not calls
// is an error, so that it cannot be read as headers instead (as in mlx-lm).
func mistralList(list []json.RawMessage) ([]toolCall, error) {
	calls := make([]toolCall, 0, len(list))
	for _, it := range list {
		c, ok := readCall(it)
		if !ok || string(c.arguments) == "null" {
			// An explicit null is not a call (mlx-lm: not a dict).
			return nil, errNotToolCall
		}
		a, err := argumentsJSON(c.arguments)
		if err != nil {
			return nil, err
		}
		calls = append(calls, toolCall{ID: c.id, Name: c.name, Arguments: a})
	}
	return calls, nil
}

// nextArgsHeader finds the next "NAME[ARGS]" at or after pos (NAME: word
// characters and '-', spaces allowed around [ARGS]) and returns the name
// and where the arguments start.
func nextArgsHeader(text string, pos int) (name string, end int, ok bool) {
	for {
		i := strings.Index(text[pos:], "[ARGS]")
		if i < 0 {
			return "", 0, false
		}
		at := pos + i
		j := strings.TrimRightFunc(text[:at], unicode.IsSpace)
		k := len(j)
		for k > 0 {
			r, size := utf8.DecodeLastRuneInString(j[:k])
			if !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)) {
				break
			}
			k -= size
		}
		end = at + len("[ARGS]")
		// A search from pos cannot start a name before pos.
		if k = max(k, pos); k < len(j) {
			end += len(text[end:]) - len(strings.TrimLeftFunc(text[end:], unicode.IsSpace))
			return j[k:], end, true
		}
		pos = end
	}
}

// gemma4Quote is Gemma 4's string delimiter: <|"|>text<|"|>.
const gemma4Quote = `<|"|>`

// parseGemma4 reads Gemma 4's calls, call:NAME{key:value,...} with bare keys
// and <|"|>-delimited strings, every such call in the text (mlx-lm's gemma4
// parser: its recursive regex for the balanced braces, then the arguments
// rewritten to JSON: strings taken out, bare keys after { or , quoted,
// strings put back JSON-escaped).
func parseGemma4(text string, _ []toolDef) ([]toolCall, error) {
	var calls []toolCall
	for pos := 0; pos < len(text); {
		i := strings.Index(text[pos:], "call:")
		if i < 0 {
			break
		}
		at := pos + i
		name, args, end, ok := gemma4Call(text, at+len("call:"))
		if !ok {
			pos = at + 1
			continue
		}
		raw, err := gemma4ArgsJSON(args)
		if err != nil {
			return nil, err
		}
		a, err := argumentsJSON(json.RawMessage(raw))
		if err != nil {
			return nil, err
		}
		calls = append(calls, toolCall{Name: name, Arguments: a})
		pos = end
	}
	if len(calls) == 0 {
		return nil, errNotToolCall
	}
	return calls, nil
}

// gemma4Call reads NAME{...} at i: a name of word characters and '-', then
// a brace group balanced outside string literals. end is just past it.
func gemma4Call(text string, i int) (name, args string, end int, ok bool) {
	j := i
	for j < len(text) && (isWordByte(text[j]) || text[j] == '-') {
		j++
	}
	if j == i || j >= len(text) || text[j] != '{' {
		return "", "", 0, false
	}
	depth := 0
	for k := j; k < len(text); {
		switch {
		case strings.HasPrefix(text[k:], gemma4Quote):
			close := strings.Index(text[k+len(gemma4Quote):], gemma4Quote)
			if close < 0 {
				return "", "", 0, false // an unterminated string: no call here
			}
			k += 2*len(gemma4Quote) + close
			continue
		case text[k] == '{':
			depth++
		case text[k] == '}':
			depth--
			if depth == 0 {
				return text[i:j], text[j : k+1], k + 1, true
			}
		}
		k++
	}
	return "", "", 0, false
}

// isWordByte is \w for ASCII; other bytes of a UTF-8 letter count too, as
// Python's \w takes Unicode letters.
func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// gemma4ArgsJSON is _gemma4_args_to_json.
func gemma4ArgsJSON(args string) (string, error) {
	var strs []string
	var b strings.Builder
	for {
		i := strings.Index(args, gemma4Quote)
		if i < 0 {
			b.WriteString(args)
			break
		}
		j := strings.Index(args[i+len(gemma4Quote):], gemma4Quote)
		if j < 0 {
			b.WriteString(args)
			break
		}
		b.WriteString(args[:i])
		fmt.Fprintf(&b, "\x00%d\x00", len(strs))
		strs = append(strs, args[i+len(gemma4Quote):i+len(gemma4Quote)+j])
		args = args[i+2*len(gemma4Quote)+j:]
	}
	s := b.String()
	var out strings.Builder
	for k := 0; k < len(s); k++ {
		out.WriteByte(s[k])
		if s[k] != '{' && s[k] != ',' {
			continue
		}
		e := k + 1
		for e < len(s) && isWordByte(s[e]) {
			e++
		}
		if e > k+1 && e < len(s) && s[e] == ':' {
			fmt.Fprintf(&out, "%q:", s[k+1:e])
			k = e
		}
	}
	s = out.String()
	for i, v := range strs {
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			return "", err
		}
		s = strings.Replace(s, fmt.Sprintf("\x00%d\x00", i), strings.TrimSuffix(enc.String(), "\n"), 1)
	}
	return s, nil
}
