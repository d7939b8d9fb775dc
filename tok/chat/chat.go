// Package chat renders a model's chat template the way transformers'
// apply_chat_template(tokenize=False) does, byte for byte: the same
// message clean-up (keys whose value is null are dropped, reasoning fields
// aliased), the same template variables (messages, tools, documents,
// add_generation_prompt, the special tokens, then caller kwargs), rendered by
// the jinja2-compatible engine in tok/jinja.
//
// Key order matters to templates that print JSON (tojson of tool schemas,
// tool-call arguments): pass JSON you received as json.RawMessage (or use
// RenderJSON) and it keeps its order. Go maps have none, so a map's keys are
// put in a fixed order: "role", then "content", then the rest sorted.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mlxgo/mlxgo/tok/jinja"
)

// SpecialTokens are the tokenizer's special tokens, visible to templates as
// bos_token, eos_token, pad_token and unk_token. An empty field leaves the
// variable undefined, as transformers does for a token the tokenizer lacks.
type SpecialTokens struct{ BOS, EOS, PAD, UNK string }

// Options are apply_chat_template's rendering arguments.
type Options struct {
	AddGenerationPrompt bool
	// Tools are tool definitions (JSON schemas); nil means no tools, which
	// templates see as None. Elements may be json.RawMessage to keep key order.
	Tools []any
	// Kwargs are extra template variables (enable_thinking, ...); they
	// override the special tokens of the same name.
	Kwargs map[string]any
}

// Template is a parsed chat template.
type Template struct {
	tmpl   *jinja.Template
	tokens SpecialTokens
}

// New parses a chat template. Syntax errors name the template line.
func New(source string, tokens SpecialTokens) (*Template, error) {
	t, err := jinja.Parse(source)
	if err != nil {
		return nil, fmt.Errorf("cannot parse chat template: %w", err)
	}
	return &Template{tmpl: t, tokens: tokens}, nil
}

// SetNow replaces the clock behind the template's strftime_now (for tests).
func (t *Template) SetNow(now func() time.Time) { t.tmpl.Now = now }

// SetLimits bounds the work of one render (see jinja.Limits).
func (t *Template) SetLimits(l jinja.Limits) { t.tmpl.Limits = l }

// ErrEmptyConversation is returned for a render with no messages.
var ErrEmptyConversation = errors.New("cannot apply chat template to an empty conversation")

// Render renders messages (decoded JSON objects). Errors raised by the
// template's raise_exception wrap a *jinja.RaiseError carrying its message.
func (t *Template) Render(messages []map[string]any, opts Options) (string, error) {
	list := make([]any, len(messages))
	for i, m := range messages {
		d, err := orderedMessage(m)
		if err != nil {
			return "", fmt.Errorf("cannot use message %d: %w", i, err)
		}
		list[i] = d
	}
	return t.render(list, opts)
}

// RenderJSON renders a JSON array of message objects, keeping every
// object's key order exactly as given.
func (t *Template) RenderJSON(messages []byte, opts Options) (string, error) {
	v, err := jinja.DecodeJSON(messages)
	if err != nil {
		return "", fmt.Errorf("cannot read messages: %w", err)
	}
	l, ok := v.(*jinja.List)
	if !ok {
		return "", fmt.Errorf("cannot read messages: expected a JSON array")
	}
	return t.render(l.Items, opts)
}

// orderedMessage converts a message map with its keys in the documented order.
func orderedMessage(m map[string]any) (*jinja.Dict, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		switch k {
		case "role":
			return 0
		case "content":
			return 1
		}
		return 2
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := rank(keys[i]), rank(keys[j])
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	d := jinja.NewDict()
	for _, k := range keys {
		v, err := jinja.FromGo(m[k])
		if err != nil {
			return nil, err
		}
		d.SetString(k, v)
	}
	return d, nil
}

func (t *Template) render(messages []any, opts Options) (string, error) {
	if len(messages) == 0 {
		return "", ErrEmptyConversation
	}
	chat := make([]jinja.Value, len(messages))
	for i, m := range messages {
		v, err := jinja.FromGo(m)
		if err != nil {
			return "", fmt.Errorf("cannot use message %d: %w", i, err)
		}
		d, ok := v.(*jinja.Dict)
		if !ok {
			return "", fmt.Errorf("chat messages should be objects, but message %d is not", i)
		}
		chat[i] = aliasReasoning(dropNulls(d))
	}
	vars := map[string]any{}
	for name, tok := range map[string]string{"bos_token": t.tokens.BOS, "eos_token": t.tokens.EOS,
		"pad_token": t.tokens.PAD, "unk_token": t.tokens.UNK} {
		if tok != "" {
			vars[name] = tok
		}
	}
	for k, v := range opts.Kwargs {
		switch k {
		case "messages", "tools", "documents", "add_generation_prompt":
			return "", fmt.Errorf("cannot pass template variable %q as a kwarg: it is set by the renderer", k)
		}
		cv, err := jinja.FromGo(v)
		if err != nil {
			return "", fmt.Errorf("cannot use template kwarg %q: %w", k, err)
		}
		vars[k] = cv
	}
	var tools jinja.Value // None unless tools were given
	if opts.Tools != nil {
		l := &jinja.List{}
		for i, tool := range opts.Tools {
			v, err := jinja.FromGo(tool)
			if err != nil {
				return "", fmt.Errorf("cannot use tool %d: %w", i, err)
			}
			if _, ok := v.(*jinja.Dict); !ok {
				return "", fmt.Errorf("tools should be JSON schema objects, but tool %d is not", i)
			}
			l.Items = append(l.Items, v)
		}
		tools = l
	}
	vars["messages"] = &jinja.List{Items: chat}
	vars["tools"] = tools
	vars["documents"] = nil
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	out, err := t.tmpl.Render(vars)
	if err != nil {
		return "", fmt.Errorf("cannot render chat template: %w", err)
	}
	return out, nil
}

// dropNulls removes the keys whose value is null, as apply_chat_template
// does: OpenAI-style clients send content=null with tool calls, and
// templates handle a missing key but would print "None".
func dropNulls(d *jinja.Dict) *jinja.Dict {
	out := jinja.NewDict()
	for i, k := range d.Keys() {
		if v := d.Values()[i]; v != nil {
			out.Set(k, v)
		}
	}
	return out
}

// reasoningFields are the names a message's reasoning may come under; the
// first is the one most templates read.
var reasoningFields = []string{"reasoning_content", "thinking", "reasoning"}

// aliasReasoning mirrors transformers' _alias_reasoning_fields:
// {"thinking": r, **message, "reasoning_content": r} where r is the first
// reasoning field present.
func aliasReasoning(d *jinja.Dict) *jinja.Dict {
	var reasoning jinja.Value
	found := false
	for _, f := range reasoningFields {
		if v, ok := d.Get(f); ok && v != nil {
			reasoning, found = v, true
			break
		}
	}
	if !found {
		return d
	}
	out := jinja.NewDict()
	out.SetString("thinking", reasoning)
	for i, k := range d.Keys() {
		out.Set(k, d.Values()[i])
	}
	out.SetString("reasoning_content", reasoning)
	return out
}

// DecodeTools decodes a JSON array of tool definitions into Options.Tools,
// keeping key order.
func DecodeTools(data []byte) ([]any, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("cannot read tools: %w", err)
	}
	out := make([]any, len(raw))
	for i, r := range raw {
		out[i] = r
	}
	return out, nil
}
