package tok

import (
	"encoding/json"
	"fmt"
)

// A postProcessor adds special tokens around an encoded sequence (only ids
// matter here: offsets and type ids are not tracked).
type postProcessor interface {
	process(ids []int32, addSpecial bool) []int32
	// added is how many ids process adds when addSpecial is set (truncation
	// leaves room for them).
	added() int
}

// templateProcessor is TemplateProcessing's single-sequence template.
type templateProcessor struct {
	items []templateItem
}

type templateItem struct {
	sequence bool    // the input sequence ($A) rather than a special token
	ids      []int32 // the special token's ids
}

func (p templateProcessor) process(ids []int32, addSpecial bool) []int32 {
	if !addSpecial {
		return ids
	}
	out := make([]int32, 0, len(ids)+p.added())
	for _, it := range p.items {
		if it.sequence {
			out = append(out, ids...)
		} else {
			out = append(out, it.ids...)
		}
	}
	return out
}

func (p templateProcessor) added() int {
	n := 0
	for _, it := range p.items {
		n += len(it.ids)
	}
	return n
}

type sequenceProcessor []postProcessor

func (seq sequenceProcessor) process(ids []int32, addSpecial bool) []int32 {
	for _, p := range seq {
		ids = p.process(ids, addSpecial)
	}
	return ids
}

func (seq sequenceProcessor) added() int {
	n := 0
	for _, p := range seq {
		n += p.added()
	}
	return n
}

// byteLevelProcessor only trims offsets in tokenizers; ids pass through.
type byteLevelProcessor struct{}

func (byteLevelProcessor) process(ids []int32, _ bool) []int32 { return ids }
func (byteLevelProcessor) added() int                          { return 0 }

type processorJSON struct {
	Type          string            `json:"type"`
	Single        []json.RawMessage `json:"single"`
	SpecialTokens map[string]struct {
		ID  string  `json:"id"`
		IDs []int32 `json:"ids"`
	} `json:"special_tokens"`
	Sep        []json.RawMessage `json:"sep"`
	Cls        []json.RawMessage `json:"cls"`
	Processors []json.RawMessage `json:"processors"`
}

// bertPair reads BertProcessing/RobertaProcessing's ["[SEP]", 102].
func bertPair(raw []json.RawMessage) (int32, error) {
	var s string
	var id int32
	if len(raw) != 2 || json.Unmarshal(raw[0], &s) != nil || json.Unmarshal(raw[1], &id) != nil {
		return 0, fmt.Errorf("cannot parse post_processor token: want [content, id]")
	}
	return id, nil
}

func parsePostProcessor(raw json.RawMessage) (postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	var j processorJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("cannot parse post_processor: %w", err)
	}
	switch j.Type {
	case "TemplateProcessing":
		var p templateProcessor
		for _, r := range j.Single {
			var it struct {
				SpecialToken *struct{ ID string } `json:"SpecialToken"`
				Sequence     *struct{ ID string } `json:"Sequence"`
			}
			if err := json.Unmarshal(r, &it); err != nil {
				return nil, fmt.Errorf("cannot parse TemplateProcessing item: %w", err)
			}
			switch {
			case it.Sequence != nil:
				p.items = append(p.items, templateItem{sequence: true})
			case it.SpecialToken != nil:
				st, ok := j.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("cannot parse TemplateProcessing: special token %q is not defined", it.SpecialToken.ID)
				}
				p.items = append(p.items, templateItem{ids: st.IDs})
			default:
				return nil, fmt.Errorf("cannot parse TemplateProcessing item %s", r)
			}
		}
		return p, nil
	case "BertProcessing", "RobertaProcessing":
		cls, err := bertPair(j.Cls)
		if err != nil {
			return nil, err
		}
		sep, err := bertPair(j.Sep)
		if err != nil {
			return nil, err
		}
		// RobertaProcessing's trim_offsets and add_prefix_space touch offsets only.
		return templateProcessor{items: []templateItem{{ids: []int32{cls}}, {sequence: true}, {ids: []int32{sep}}}}, nil
	case "ByteLevel":
		return byteLevelProcessor{}, nil
	case "Sequence":
		var seq sequenceProcessor
		for _, r := range j.Processors {
			p, err := parsePostProcessor(r)
			if err != nil {
				return nil, err
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "":
		return nil, fmt.Errorf("post_processor has no type")
	default:
		return nil, fmt.Errorf("unsupported post_processor %q", j.Type)
	}
}
