package gen

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/models"
)

// TestSpeculativeRefuses: what speculative decoding cannot run is an error
// naming why, before anything runs: caches that cannot be trimmed (Gemma 3's
// sliding-window layers, --max-kv-size), a grammar, a negative draft count,
// no draft model.
func TestSpeculativeRefuses(t *testing.T) {
	mlxtest.Need(t)
	llama, gemma, qwen2 := oracleModelDir(t, "llama-bf16"), oracleModelDir(t, "gemma3_text-bf16"), oracleModelDir(t, "qwen2-bf16")
	mlxtest.Do(t, func() error {
		lm, err := models.Load(llama, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer lm.Close()
		gm, err := models.Load(gemma, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer gm.Close()
		qm, err := models.Load(qwen2, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer qm.Close()
		prompt := promptIDs(8, 512)
		for _, tc := range []struct {
			name          string
			target, draft Model
			k             int
			o             Options
			want          string
			is            error
		}{
			{"sliding-window target", gm, lm, 2, Options{}, "layer 0 of the model keeps a rotating window", ErrNotTrimmable},
			{"sliding-window draft", lm, gm, 2, Options{}, "layer 0 of the draft model keeps a rotating window", ErrNotTrimmable},
			{"max-kv-size", qm, qm, 2, Options{KV: kv.Options{MaxKVSize: 16}}, "rotating window", ErrNotTrimmable},
			{"grammar", lm, lm, 2, Options{Grammar: &Grammar{}}, "cannot run under a grammar", nil},
			{"negative draft tokens", lm, lm, -1, Options{}, "invalid number of draft tokens -1", nil},
			{"no draft", lm, nil, 2, Options{}, "needs a draft model", nil},
			{"empty prompt", lm, lm, 2, Options{}, "empty prompt", nil},
		} {
			p := prompt
			if tc.name == "empty prompt" {
				p = nil
			}
			d := Draft{NumDraftTokens: tc.k}
			if tc.draft != nil {
				d.Model = tc.draft
			}
			tc.o.MaxTokens = 4 // should one be accepted after all
			_, err := Speculate(context.Background(), tc.target, d, p, tc.o, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
			}
		}
		return nil
	})
}

// TestSpeculativeStops: an EOS ends the generation unemitted, a stop from
// emit ends it as a stop, MaxTokens as a length, and cancellation with the
// context's error; the figures count what was emitted.
func TestSpeculativeStops(t *testing.T) {
	mlxtest.Need(t)
	dir := oracleModelDir(t, "llama-bf16")
	mlxtest.Do(t, func() error {
		m, err := models.Load(dir, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer m.Close()
		prompt := promptIDs(12, 512)
		d := Draft{Model: m, NumDraftTokens: 3}
		var all []int32
		st, err := Speculate(context.Background(), m, d, prompt, Options{MaxTokens: 10}, func(tok int32) error {
			all = append(all, tok)
			return nil
		})
		if err != nil || st.FinishReason != FinishLength || len(all) != 10 || st.GeneratedTokens != 10 {
			t.Fatalf("max tokens: %v, %s, %d tokens", err, st.FinishReason, len(all))
		}
		// A model as its own draft: every draft is accepted.
		if st.AcceptedTokens != st.DraftTokens || st.DraftTokens == 0 || st.TokensPerPass() <= 1 {
			t.Fatalf("self draft: accepted %d of %d, %.2f tokens per pass", st.AcceptedTokens, st.DraftTokens, st.TokensPerPass())
		}
		eos := all[5]
		var got []int32
		st, err = Speculate(context.Background(), m, d, prompt, Options{MaxTokens: 10, EOS: []int32{eos}}, func(tok int32) error {
			got = append(got, tok)
			return nil
		})
		first := 0
		for first < len(all) && all[first] != eos {
			first++
		}
		if err != nil || st.FinishReason != FinishStop || len(got) != first {
			t.Fatalf("eos: %v, %s, %v (all %v)", err, st.FinishReason, got, all)
		}
		n := 0
		st, err = Speculate(context.Background(), m, d, prompt, Options{MaxTokens: 10}, func(tok int32) error {
			n++
			if n == 2 {
				return ErrStop
			}
			return nil
		})
		if err != nil || st.FinishReason != FinishStop || st.GeneratedTokens != 2 {
			t.Fatalf("stop: %v, %s, %d", err, st.FinishReason, st.GeneratedTokens)
		}
		ctx, cancel := context.WithCancel(context.Background())
		st, err = Speculate(ctx, m, d, prompt, Options{MaxTokens: 10}, func(tok int32) error {
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || st.FinishReason != FinishCancelled || st.GeneratedTokens != 1 {
			t.Fatalf("cancel: %v, %s, %d", err, st.FinishReason, st.GeneratedTokens)
		}
		return nil
	})
}
