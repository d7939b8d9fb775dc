package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// Speculative decoding in serve (README, "Speculative decoding"): with a
// draft model, completions run as gen.Speculative, one at a time, as
// mlx_lm.server runs a draft model (it turns batching off). A request may
// set num_draft_tokens, and draft_model only to the draft loaded (its id,
// its path, or mlx_lm.server's "default_model"). Executions that cannot be
// drafted for (under a grammar) run on the plain runner, without a draft.

// SpecRunner is the Runner of a model served with a draft model.
type SpecRunner struct {
	plain    *MLXRunner // the target, its KV settings, and the rows not drafted for
	Draft    models.Model
	DraftID  string // the id requests may name it by
	DraftArg string // the path it was loaded from (--draft-model)
	NumDraft int    // --num-draft-tokens: a request's default

	cur *specRow // the one speculative execution running, if any
}

type specRow struct {
	s    *gen.Speculative
	done func(Result, error)
}

// WithDraft returns m served with draft decoding speculatively for it.
// Speculative decoding runs one execution at a time: m must not be batched.
func WithDraft(m Model, draft models.Model, id, arg string, numDraft int) (Model, error) {
	r, ok := m.Runner.(*MLXRunner)
	switch {
	case !ok:
		return m, fmt.Errorf("cannot serve %s with a draft model: its runner (%T) is not an MLX runner", m.ID, m.Runner)
	case r.BatchRows > 1:
		return m, fmt.Errorf("cannot serve %s with a draft model and --batch %d: speculative decoding runs one request at a time, as mlx_lm.server does; use --batch 1", m.ID, r.BatchRows)
	case numDraft < 0:
		return m, fmt.Errorf("invalid number of draft tokens %d: want 0 or more", numDraft)
	}
	m.Runner = &SpecRunner{plain: r, Draft: draft, DraftID: id, DraftArg: arg, NumDraft: numDraft}
	return m, nil
}

// MaxRows implements Runner: one execution at a time (serial).
func (r *SpecRunner) MaxRows() int { return 1 }

// Add implements Runner.
func (r *SpecRunner) Add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error {
	if o.Grammar != nil {
		// A grammar must see each token before the next is drafted.
		return r.plain.Add(ctx, prompt, o, seed, emit, done)
	}
	if r.cur != nil || r.plain.Rows() > 0 {
		return errors.New("cannot add the row: speculative decoding runs one execution at a time")
	}
	k := r.NumDraft
	if o.NumDraftTokens != nil {
		k = *o.NumDraftTokens
	}
	return mlx.Do(func() error {
		o.KV, o.QuantizedKVStart = r.plain.KV, r.plain.QuantizedKVStart
		// A request's adapter (adapters.go) is the target's view; the
		// draft runs as loaded, as mlx_lm.server's does.
		var target gen.Model = r.plain.Model
		if name := adapterFrom(ctx); name != "" {
			a, ok := r.plain.Model.(models.Adapted)
			if !ok {
				return fmt.Errorf("cannot run adapter %s: the model was loaded without adapters", name)
			}
			v, err := a.WithAdapter(name)
			if err != nil {
				return err
			}
			target = v
		}
		s, err := gen.NewSpeculative(ctx, target, gen.Draft{Model: r.Draft, NumDraftTokens: k}, prompt, o, seed, emit)
		if err != nil {
			return err
		}
		r.cur = &specRow{s: s, done: done}
		return nil
	})
}

// Step implements Runner: one prefill chunk or one draft-and-verify round.
func (r *SpecRunner) Step() error {
	if r.cur == nil {
		return r.plain.Step()
	}
	return mlx.Do(func() error {
		r.cur.s.Step()
		r.settle()
		return nil
	})
}

// settle hands an ended execution's result to its done (on the executor).
func (r *SpecRunner) settle() {
	if r.cur == nil || !r.cur.s.Ended() {
		return
	}
	st, err := r.cur.s.Result()
	res := Result{Stats: st}
	if m, merr := mlx.Memory(); merr == nil {
		res.ActiveMemory, res.PeakMemory = m.Active, m.Peak
	}
	if r.plain.Cache != nil {
		res.CacheBytes = r.plain.Cache.Bytes()
	}
	done := r.cur.done
	r.cur = nil
	done(res, err)
}

// Rows and Decoding implement Runner.
func (r *SpecRunner) Rows() int {
	if r.cur != nil {
		return 1
	}
	return r.plain.Rows()
}

func (r *SpecRunner) Decoding() int {
	if r.cur != nil {
		return 1
	}
	return r.plain.Decoding()
}

// Abort implements Runner.
func (r *SpecRunner) Abort(err error) {
	if r.cur != nil {
		mlx.Do(func() error {
			r.cur.s.Close()
			st, _ := r.cur.s.Result()
			done := r.cur.done
			r.cur = nil
			done(Result{Stats: st}, err)
			return nil
		})
	}
	r.plain.Abort(err)
}

// draftRequest is what a request asks of speculative decoding.
type draftRequest struct {
	model *string // draft_model; nil: absent or null
	num   *int    // num_draft_tokens; nil: absent or null
}

// decodeDraftFields reads mlx_lm.server's draft_model and num_draft_tokens.
func decodeDraftFields(data []byte) (draftRequest, error) {
	var b struct {
		DraftModel     json.RawMessage `json:"draft_model"`
		NumDraftTokens json.RawMessage `json:"num_draft_tokens"`
	}
	var d draftRequest
	if json.Unmarshal(data, &b) != nil {
		return d, nil // the typed decode reports the syntax error
	}
	if !isNull(b.DraftModel) {
		var s string
		if json.Unmarshal(b.DraftModel, &s) != nil {
			return d, invalidf("draft_model", "draft_model must be a string")
		}
		d.model = &s
	}
	if !isNull(b.NumDraftTokens) {
		var n int
		if json.Unmarshal(b.NumDraftTokens, &n) != nil || n < 0 || n > maxDraftTokens {
			return d, invalidf("num_draft_tokens", "num_draft_tokens must be an integer from 0 to %d", maxDraftTokens)
		}
		d.num = &n
	}
	return d, nil
}

// maxDraftTokens bounds num_draft_tokens: each draft token is one draft
// forward pass before the target's, so a huge value is only a way to stall
// the engine.
const maxDraftTokens = 64

// checkDraft refuses what a request asks of speculative decoding that this
// server cannot honour, and sets the execution's draft tokens in o.
func (s *Server) checkDraft(p *params, o *gen.Options) error {
	sr, ok := s.cfg.Model.Runner.(*SpecRunner)
	d := p.draft
	if !ok {
		if d.model != nil && *d.model != "" && *d.model != "default_model" {
			return unsupported("draft_model", "no draft model is loaded (serve it with --draft-model)")
		}
		if d.num != nil && *d.num != 0 {
			return unsupported("num_draft_tokens", "no draft model is loaded (serve it with --draft-model)")
		}
		return nil
	}
	if d.model != nil {
		switch *d.model {
		case "", "default_model", sr.DraftID, sr.DraftArg:
		default:
			return unsupported("draft_model", fmt.Sprintf("the draft model loaded is %q; another cannot be loaded per request", sr.DraftID))
		}
	}
	o.NumDraftTokens = d.num
	return nil
}

// Speculation is the execution composition's record of speculative
// decoding (x_mlxgo.speculative): the draft, the tokens it proposed per
// pass, and what happened, summed over the request's choices.
type Speculation struct {
	DraftModel     string  `json:"draft_model"`
	NumDraftTokens int     `json:"num_draft_tokens"`
	DraftTokens    int     `json:"draft_tokens"`
	AcceptedTokens int     `json:"accepted_tokens"`
	AcceptanceRate float64 `json:"acceptance_rate"`
	TargetPasses   int     `json:"target_passes"`
	// TokensPerPass is the tokens generated per target forward pass: the
	// speed-up over plain decoding were drafting free.
	TokensPerPass float64 `json:"tokens_per_pass"`
}

// speculation is the composition's speculative record of r, nil when no
// choice ran speculatively.
func (r *response) speculation() *Speculation {
	sr, ok := r.s.cfg.Model.Runner.(*SpecRunner)
	if !ok {
		return nil
	}
	var st gen.Stats
	for _, ch := range r.choices {
		st.DraftTokens += ch.res.Stats.DraftTokens
		st.AcceptedTokens += ch.res.Stats.AcceptedTokens
		st.TargetPasses += ch.res.Stats.TargetPasses
		st.GeneratedTokens += ch.res.Stats.GeneratedTokens
	}
	if st.TargetPasses == 0 {
		return nil
	}
	k := sr.NumDraft
	if r.p.draft.num != nil {
		k = *r.p.draft.num
	}
	return &Speculation{
		DraftModel: sr.DraftID, NumDraftTokens: k, DraftTokens: st.DraftTokens, AcceptedTokens: st.AcceptedTokens,
		AcceptanceRate: st.AcceptanceRate(), TargetPasses: st.TargetPasses, TokensPerPass: st.TokensPerPass(),
	}
}

// specMetrics are /metrics' speculative decoding series.
type specMetrics struct {
	drafted, accepted, passes, generated counter
}

func (m *specMetrics) add(st gen.Stats) {
	if st.TargetPasses == 0 {
		return
	}
	m.drafted.add(float64(st.DraftTokens))
	m.accepted.add(float64(st.AcceptedTokens))
	m.passes.add(float64(st.TargetPasses))
	m.generated.add(float64(st.GeneratedTokens))
}

func (m *specMetrics) write(w interface{ Write([]byte) (int, error) }) {
	d, a, p, g := m.drafted.get(), m.accepted.get(), m.passes.get(), m.generated.get()
	rate, perPass := 0.0, 0.0
	if d > 0 {
		rate = a / d
	}
	if p > 0 {
		perPass = g / p
	}
	for _, s := range []struct {
		name, typ, help string
		v               float64
	}{
		{"mlxgo_speculative_draft_tokens_total", "counter", "Tokens the draft model proposed.", d},
		{"mlxgo_speculative_accepted_tokens_total", "counter", "Draft tokens the target accepted.", a},
		{"mlxgo_speculative_target_passes_total", "counter", "Target forward passes that verified drafts.", p},
		{"mlxgo_speculative_acceptance_rate", "gauge", "Accepted over proposed draft tokens, since start.", rate},
		{"mlxgo_speculative_tokens_per_pass", "gauge", "Tokens generated per target pass by speculative executions, since start (the speed-up were drafting free).", perPass},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", s.name, s.help, s.name, s.typ, s.name, formatFloat(s.v))
	}
}
