package main

import (
	"fmt"

	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

// loadedDraft is --draft-model: the model that drafts tokens for
// speculative decoding (generate and serve), its tokenizer loading beside
// the weights.
type loadedDraft struct {
	path  string
	model models.Model
	tokCh chan draftTok
}

type draftTok struct {
	t   *tok.Tokenizer
	err error
}

// startDraft resolves arg as -m resolves a model and starts loading its
// tokenizer.
func startDraft(arg string, getenv func(string) string) (*loadedDraft, error) {
	path, err := resolveModel(arg, getenv)
	if err != nil {
		return nil, fmt.Errorf("--draft-model: %w", err)
	}
	d := &loadedDraft{path: path, tokCh: make(chan draftTok, 1)}
	go func() {
		t, err := tok.Load(path)
		d.tokCh <- draftTok{t, err}
	}()
	return d, nil
}

// load loads the draft's weights (on the MLX executor) and checks that it
// has the target's vocabulary. On an error nothing stays loaded.
func (d *loadedDraft) load(target *tok.Tokenizer) error {
	tr := <-d.tokCh
	if tr.err != nil {
		return fmt.Errorf("cannot load the tokenizer of the draft model %s: %w", d.path, tr.err)
	}
	if err := sameVocabulary(target, tr.t); err != nil {
		return fmt.Errorf("cannot use %s as the draft model: %w", d.path, err)
	}
	m, err := models.Load(d.path, models.LoadOptions{})
	if err != nil {
		return fmt.Errorf("cannot load the draft model %s: %w", d.path, err)
	}
	d.model = m
	return nil
}

// sameVocabulary checks that the draft's token ids mean what the target's
// do: the same size, and the same token (and specialness) for every id. mlx_lm.generate
// compares the tokenizers' vocab_size only; a draft whose ids mean other
// tokens would be accepted there and draft nonsense.
func sameVocabulary(target, draft *tok.Tokenizer) error {
	if a, b := target.VocabSize(), draft.VocabSize(); a != b {
		return fmt.Errorf("its tokenizer has %d tokens, the model's %d: the draft must share the model's vocabulary", b, a)
	}
	for id := range int32(target.VocabSize()) {
		a, oka := target.IDToToken(id)
		b, okb := draft.IDToToken(id)
		if oka != okb || a != b || target.IsSpecial(id) != draft.IsSpecial(id) {
			return fmt.Errorf("its tokenizer differs from the model's at id %d (%q, the model's %q): the draft must share the model's vocabulary", id, b, a)
		}
	}
	return nil
}
