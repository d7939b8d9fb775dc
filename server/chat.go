package server

import (
	"errors"
	"fmt"
	"sync"

	"github.com/mlxgo/mlxgo/tok"
	"github.com/mlxgo/mlxgo/tok/chat"
)

// ErrNoChatTemplate is ChatTemplate's error for a tokenizer without one.
var ErrNoChatTemplate = errors.New("the model has no chat template")

// ErrChatRender marks a conversation the template refused (roles that do
// not alternate, ...): the caller's input is at fault, not the model.
var ErrChatRender = errors.New("cannot render the chat template")

// ChatTemplate is a tokenizer's chat template, parsed once: the one
// chat-encoding path of `mlxgo serve` and `mlxgo generate`. Renders are
// serialized, since the template engine's thread safety is not promised.
type ChatTemplate struct {
	t    *tok.Tokenizer
	once sync.Once
	mu   sync.Mutex
	tmpl *chat.Template
	err  error
}

// NewChatTemplate returns t's chat template; it is parsed at the first
// render.
func NewChatTemplate(t *tok.Tokenizer) *ChatTemplate { return &ChatTemplate{t: t} }

// Render applies the template to a JSON list of messages.
func (c *ChatTemplate) Render(messages []byte, o chat.Options) (string, error) {
	c.once.Do(func() {
		cfg := c.t.Config()
		if cfg.ChatTemplate == "" {
			c.err = ErrNoChatTemplate
			return
		}
		c.tmpl, c.err = chat.New(cfg.ChatTemplate, chat.SpecialTokens{BOS: cfg.BOS, EOS: cfg.EOS, PAD: cfg.PAD, UNK: cfg.UNK})
	})
	if c.err != nil {
		return "", c.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.tmpl.RenderJSON(messages, o)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrChatRender, err)
	}
	return out, nil
}

// Encode renders messages and encodes the text without special tokens
// (the template writes BOS and the rest), as mlx_lm.server and
// mlx_lm.generate do.
func (c *ChatTemplate) Encode(messages []byte, o chat.Options) ([]int32, error) {
	text, err := c.Render(messages, o)
	if err != nil {
		return nil, err
	}
	return c.t.Encode(text, false)
}
