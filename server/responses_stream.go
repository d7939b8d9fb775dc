package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// streamResponse answers with the Responses event chain: response.created
// and response.in_progress, then per output item output_item.added, its
// content part and deltas (reasoning_text, output_text or
// function_call_arguments) and their done events, output_item.done, and
// last response.completed (response.incomplete when max_output_tokens
// ended it).
func (s *Server) streamResponse(w http.ResponseWriter, jobs []*job, ro *responseOut) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	seq := 0
	send := func(name string, v map[string]any) error {
		v["type"], v["sequence_number"] = name, seq
		seq++
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b); err != nil {
			return errClientGone
		}
		return rc.Flush()
	}
	if send("response.created", map[string]any{"response": ro.object("in_progress")}) != nil ||
		send("response.in_progress", map[string]any{"response": ro.object("in_progress")}) != nil {
		return
	}
	// The open item: its kind (reasoning or message), id and text so far.
	open, openID := "", ""
	var text strings.Builder
	index := func() int { return len(ro.items) }
	closeItem := func(status string) error {
		if open == "" {
			return nil
		}
		var item, part map[string]any
		ref := map[string]any{"item_id": openID, "output_index": index(), "content_index": 0}
		with := func(extra map[string]any) map[string]any {
			m := map[string]any{}
			for k, v := range ref {
				m[k] = v
			}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		if open == "reasoning" {
			item, part = reasoningItem(openID, text.String(), status), map[string]any{"type": "reasoning_text", "text": text.String()}
			if err := send("response.reasoning_text.done", with(map[string]any{"text": text.String()})); err != nil {
				return err
			}
		} else {
			item, part = messageItem(openID, text.String(), status), outputText(text.String())
			if err := send("response.output_text.done", with(map[string]any{"text": text.String(), "logprobs": []any{}})); err != nil {
				return err
			}
		}
		if err := send("response.content_part.done", with(map[string]any{"part": part})); err != nil {
			return err
		}
		if err := send("response.output_item.done", map[string]any{"output_index": index(), "item": item}); err != nil {
			return err
		}
		ro.items = append(ro.items, item)
		open = ""
		text.Reset()
		return nil
	}
	openItem := func(kind string) error {
		if err := closeItem("completed"); err != nil {
			return err
		}
		var item, part map[string]any
		if kind == "reasoning" {
			openID = newID("rs_")
			item, part = reasoningItem(openID, "", "in_progress"), map[string]any{"type": "reasoning_text", "text": ""}
		} else {
			openID = newID("msg_")
			item, part = messageItem(openID, "", "in_progress"), outputText("")
		}
		open = kind
		if err := send("response.output_item.added", map[string]any{"output_index": index(), "item": item}); err != nil {
			return err
		}
		return send("response.content_part.added", map[string]any{"item_id": openID, "output_index": index(), "content_index": 0, "part": part})
	}
	write := func(pc piece) error {
		if pc.reasoning != "" {
			if open != "reasoning" {
				if err := openItem("reasoning"); err != nil {
					return err
				}
			}
			text.WriteString(pc.reasoning)
			if err := send("response.reasoning_text.delta", map[string]any{"item_id": openID, "output_index": index(), "content_index": 0, "delta": pc.reasoning}); err != nil {
				return err
			}
		}
		if pc.content != "" {
			if open != "message" {
				if err := openItem("message"); err != nil {
					return err
				}
			}
			text.WriteString(pc.content)
			if err := send("response.output_text.delta", map[string]any{"item_id": openID, "output_index": index(), "content_index": 0,
				"delta": pc.content, "logprobs": []any{}}); err != nil {
				return err
			}
		}
		for _, call := range pc.calls {
			if err := closeItem("completed"); err != nil {
				return err
			}
			id := newID("fc_")
			added := functionCallItem(id, call, "in_progress")
			added["arguments"] = ""
			if err := send("response.output_item.added", map[string]any{"output_index": index(), "item": added}); err != nil {
				return err
			}
			if err := send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index(), "delta": call.Arguments}); err != nil {
				return err
			}
			if err := send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index(), "name": call.Name, "arguments": call.Arguments}); err != nil {
				return err
			}
			item := functionCallItem(id, call, "completed")
			if err := send("response.output_item.done", map[string]any{"output_index": index(), "item": item}); err != nil {
				return err
			}
			ro.items = append(ro.items, item)
		}
		return nil
	}
	c := ro.r.choices[0]
	if !streamOne(jobs, c, write, func(err error) {
		ae := statusOf(err)
		e := map[string]any{"message": ae.message, "code": nil, "param": nil}
		if ae.code != "" {
			e["code"] = ae.code
		}
		if ae.param != "" {
			e["param"] = ae.param
		}
		send("error", e)
	}) {
		return
	}
	if open == "" && len(ro.items) == 0 {
		// Nothing was said: the empty message the body would hold.
		if openItem("message") != nil {
			return
		}
	}
	if closeItem(ro.itemStatus()) != nil {
		return
	}
	body := ro.object("completed")
	s.keep(ro, body)
	name := "response.completed"
	if body["status"] == "incomplete" {
		name = "response.incomplete"
	}
	send(name, map[string]any{"response": body})
}
