package whisper

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/mlxgo/mlxgo/mlx"
)

// DecodeOptions are the DecodingOptions mlxgo honours.
type DecodeOptions struct {
	Temperature float64
	// Prompt is the previous context (token ids), put after <|startofprev|>.
	Prompt []int32
	// WithoutTimestamps adds <|notimestamps|> and drops the timestamp rules.
	WithoutTimestamps bool
	// SampleLen caps the sampled tokens (0: n_text_ctx / 2, mlx-whisper's default).
	SampleLen int
	// Keys is the random state sampling at temperature > 0 draws from
	// (nil: a fresh sequence from Seed, freed after the window).
	Keys *KeySequence
	Seed uint64
	// BeamSize > 1 decodes at temperature 0 with beam search as
	// openai-whisper's BeamSearchDecoder does (that many beams; 0 or 1:
	// greedy). Ignored at temperature > 0, as transcribe() drops beam_size there.
	BeamSize int
	// Patience: beam search goes on until round(BeamSize·Patience)
	// sequences have finished (0: 1.0, OpenAI's default).
	Patience float64
	// BestOf > 1 samples that many sequences at temperature > 0 (one
	// categorical draw per step for all of them) and keeps the best ranked.
	// Ignored at temperature 0, as transcribe() drops best_of there.
	BestOf int
	// LengthPenalty ranks the candidates of a group by
	// sum_logprob / ((5 + length) / 6)^alpha (Google NMT's alpha in [0, 1]);
	// nil: by sum_logprob / length (length normalisation, OpenAI's None).
	LengthPenalty *float64
	// Trace, when set, receives each step's decoder logits for the last
	// position (float32, before any filter; [rows, vocab] flattened, one
	// row per beam or sample of the group) and the first row's token.
	Trace func(step int, logits []float32, token int32)
}

// group is DecodingTask's n_group: beam_size at temperature 0, best_of
// above it, else 1.
func (o DecodeOptions) group() int {
	if o.Temperature == 0 && o.BeamSize > 1 {
		return o.BeamSize
	}
	if o.Temperature > 0 && o.BestOf > 1 {
		return o.BestOf
	}
	return 1
}

// KeySequence is MLX's global random state as mlx-whisper draws from it:
// mx.random.seed(seed) makes the key, and every categorical call takes
// split(key)[1] and keeps split(key)[0] (KeySequence::next). One sequence
// for a whole transcription, across windows and fallbacks, draws the keys
// mlx-whisper's transcribe() draws after mx.random.seed(seed).
type KeySequence struct{ key *mlx.Array }

// NewKeySequence is mx.random.seed(seed). Call it on the executor.
func NewKeySequence(seed uint64) *KeySequence {
	k := mlx.Key(seed)
	mlx.Detach(k)
	return &KeySequence{key: k}
}

// Next is KeySequence::next: the key for one draw (in the caller's
// scope); the state moves on.
func (k *KeySequence) Next() (*mlx.Array, error) {
	ks := mlx.SplitKey(k.key, 2)
	nk := mlx.Reshape(mlx.Slice(ks, []int{0, 0}, []int{1, 2}), 2)
	sub := mlx.Reshape(mlx.Slice(ks, []int{1, 0}, []int{2, 2}), 2)
	if err := mlx.Eval(nk); err != nil {
		return nil, err
	}
	mlx.Detach(nk)
	k.key.Free()
	k.key = nk
	return sub, nil
}

// Free releases the state.
func (k *KeySequence) Free() {
	if k != nil && k.key != nil {
		k.key.Free()
		k.key = nil
	}
}

// DecodeResult is one window's DecodingResult.
type DecodeResult struct {
	Tokens           []int32
	Text             string
	AvgLogprob       float64
	NoSpeechProb     float64
	Temperature      float64
	CompressionRatio float64
}

// Decoder holds what decoding needs besides the model: the tokenizer and the
// logit filters' masks.
type Decoder struct {
	M   *Model
	Tok *Tokenizer

	suppress []float32 // SuppressTokens' mask, 0 or -inf
	blank    []int32   // SuppressBlank's tokens: encode(" ") + eot
}

// NewDecoder prepares the filters of mlx-whisper's DecodingTask.
func NewDecoder(m *Model, t *Tokenizer) (*Decoder, error) {
	d := &Decoder{M: m, Tok: t, suppress: make([]float32, m.Dims.NVocab)}
	ids, err := t.SuppressTokens()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		d.suppress[id] = float32(math.Inf(-1))
	}
	sp, err := t.Encode(" ")
	if err != nil {
		return nil, err
	}
	d.blank = append(sp, t.EOT)
	return d, nil
}

// InitialTokens is DecodingTask._get_initial_tokens (no prefix): the prompt
// after <|startofprev|>, its last n_text_ctx/2 − 1 tokens, then the start sequence.
func (d *Decoder) InitialTokens(o DecodeOptions) []int32 {
	seq := append([]int32(nil), d.Tok.SOTSequence...)
	if o.WithoutTimestamps {
		seq = append(seq, d.Tok.NoTimestamps)
	}
	if len(o.Prompt) == 0 {
		return seq
	}
	p := o.Prompt
	if keep := d.M.Dims.NTextCtx/2 - 1; len(p) > keep {
		p = p[len(p)-keep:]
	}
	out := append([]int32{d.Tok.SOTPrev}, p...)
	return append(out, seq...)
}

// compressionRatio is mlx-whisper's: UTF-8 bytes over the length of their
// zlib stream as Python's zlib writes it (zlibLen).
func compressionRatio(text string) float64 {
	b := []byte(text)
	return float64(len(b)) / float64(zlibLen(b))
}

// DecodeWindow is DecodingTask.run for one 30-second mel window [3000,
// n_mels] (float32 host values, cast to the model's dtype on MLX as
// mlx-whisper's .astype does). Call it on the executor.
func (d *Decoder) DecodeWindow(mel []float32, o DecodeOptions) (*DecodeResult, error) {
	s := mlx.NewScope()
	defer s.Close()
	dims := d.M.Dims
	x := mlx.AsType(mlx.FromSlice(mel, 1, 2*dims.NAudioCtx, dims.NMels), d.M.Activation)
	audio := d.M.Encode(x)
	if err := mlx.Eval(audio); err != nil {
		return nil, fmt.Errorf("whisper encoder: %w", err)
	}
	return d.decodeFeatures(audio, o)
}

// Encode runs only the encoder on a window (for the oracle test).
func (d *Decoder) Encode(mel []float32) ([]float32, error) {
	s := mlx.NewScope()
	defer s.Close()
	dims := d.M.Dims
	x := mlx.AsType(mlx.FromSlice(mel, 1, 2*dims.NAudioCtx, dims.NMels), d.M.Activation)
	return mlx.AsType(d.M.Encode(x), mlx.Float32).Float32s()
}

func (d *Decoder) decodeFeatures(audio *mlx.Array, o DecodeOptions) (*DecodeResult, error) {
	t := d.Tok
	dims := d.M.Dims
	initial := d.InitialTokens(o)
	sampleBegin := len(initial)
	sotIndex := 0
	for i, id := range initial {
		if id == t.SOT {
			sotIndex = i
			break
		}
	}
	sampleLen := o.SampleLen
	if sampleLen <= 0 {
		sampleLen = dims.NTextCtx / 2
	}
	maxInitial := -1
	if !o.WithoutTimestamps {
		// max_initial_timestamp 1.0 s over a precision of 30 s / n_audio_ctx.
		maxInitial = int(math.RoundToEven(1.0 / (float64(30) / float64(dims.NAudioCtx))))
	}
	// n_group rows of the same audio (its features stay one row: the
	// cross-attention broadcasts them, as mlx-whisper's decoder does).
	n := o.group()
	var beam *beamSearch
	if o.Temperature == 0 && n > 1 {
		beam = newBeamSearch(n, o.Patience, t.EOT)
	}
	var cache Cache
	defer cache.Free()
	suppress := mlx.FromSlice(d.suppress, dims.NVocab)
	blankMask := make([]float32, dims.NVocab)
	for _, id := range d.blank {
		blankMask[id] = float32(math.Inf(-1))
	}
	blank := mlx.FromSlice(blankMask, dims.NVocab)
	keys := o.Keys
	if o.Temperature > 0 && keys == nil {
		keys = NewKeySequence(o.Seed)
		defer keys.Free()
	}
	rows := make([][]int32, n)
	for i := range rows {
		rows[i] = slices.Clone(initial)
	}
	sums := make([]float32, n)
	var noSpeech float64
	inputs, inLen := slices.Repeat(initial, n), len(initial)
	negInf := float32(math.Inf(-1))
	vocab := dims.NVocab
	for step := 0; step < sampleLen; step++ {
		if step > 0 && len(rows[0]) > dims.NTextCtx {
			break
		}
		ss := mlx.NewScope()
		pre := d.M.Decode(mlx.FromSlice(inputs, n, inLen), audio, &cache)
		logits := mlx.Reshape(mlx.Slice(pre, []int{0, inLen - 1, 0}, []int{n, inLen, vocab}), n, vocab)
		if step == 0 {
			// probs_at_sot over the group, the first row's <|nospeech|>.
			row := mlx.Reshape(mlx.Slice(pre, []int{0, sotIndex, 0}, []int{n, sotIndex + 1, vocab}), n, vocab)
			probs := mlx.Softmax(row, []int{-1}, false)
			p, err := mlx.Slice(probs, []int{0, int(t.NoSpeech)}, []int{1, int(t.NoSpeech) + 1}).Float32s()
			if err != nil {
				ss.Close()
				return nil, fmt.Errorf("whisper decoder: %w", err)
			}
			noSpeech = float64(p[0])
		}
		var traced []float32
		if o.Trace != nil {
			var err error
			if traced, err = logits.Float32s(); err != nil {
				ss.Close()
				return nil, fmt.Errorf("whisper decoder: %w", err)
			}
		}
		// SuppressBlank, SuppressTokens, ApplyTimestampRules, in that order.
		if len(rows[0]) == sampleBegin {
			logits = mlx.Add(logits, blank)
		}
		logits = mlx.Add(logits, suppress)
		if !o.WithoutTimestamps {
			mask := make([]float32, n*vocab)
			for k, tokens := range rows {
				mk := mask[k*vocab : (k+1)*vocab]
				mk[t.NoTimestamps] = negInf
				seq := tokens[sampleBegin:]
				last := len(seq) >= 1 && seq[len(seq)-1] >= t.TimestampBegin
				penult := len(seq) < 2 || seq[len(seq)-2] >= t.TimestampBegin
				if last {
					if penult {
						fill(mk[t.TimestampBegin:], negInf)
					} else {
						fill(mk[:t.EOT], negInf)
					}
				}
				// mlx-whisper 0.4.3 collects the *positions* of the timestamps
				// in seq where OpenAI's code collects their values, so its
				// "timestamps must not decrease" mask covers
				// [timestamp_begin, position) — always empty. It is left out
				// here the same way, so that the tokens stay identical.
				if len(tokens) == sampleBegin {
					fill(mk[:t.TimestampBegin], negInf)
					if maxInitial >= 0 {
						fill(mk[min(int(t.TimestampBegin)+maxInitial+1, len(mk)):], negInf)
					}
				}
			}
			lp := mlx.Subtract(logits, mlx.LogSumExp(logits, []int{-1}, true))
			tsLp := mlx.LogSumExp(mlx.Slice(lp, []int{0, int(t.TimestampBegin)}, []int{n, vocab}), []int{-1}, true)
			maxText := mlx.Max(mlx.Slice(lp, []int{0, 0}, []int{n, int(t.TimestampBegin)}), []int{-1}, true)
			cmp, err := mlx.Greater(tsLp, maxText).Float32s()
			if err != nil {
				ss.Close()
				return nil, fmt.Errorf("whisper timestamp rules: %w", err)
			}
			for k := range rows {
				if cmp[k] != 0 {
					fill(mask[k*vocab:k*vocab+int(t.TimestampBegin)], negInf)
				}
			}
			logits = mlx.Add(logits, mlx.FromSlice(mask, n, vocab))
		}
		if beam != nil {
			lp, err := mlx.Subtract(logits, mlx.LogSumExp(logits, []int{-1}, true)).Float32s()
			ss.Close()
			if err != nil {
				return nil, fmt.Errorf("whisper decoder: %w", err)
			}
			var sources []int32
			var done bool
			rows, sums, sources, done = beam.update(rows, sums, lp, vocab)
			if o.Trace != nil {
				o.Trace(step, traced, rows[0][len(rows[0])-1])
			}
			if done {
				break
			}
			if err := cache.Reorder(sources); err != nil {
				return nil, fmt.Errorf("whisper decoder: %w", err)
			}
			inputs, inLen = lastTokens(rows), 1
			continue
		}
		// GreedyDecoder.update over the group: argmax, or one categorical
		// draw for all its rows.
		var next *mlx.Array
		if o.Temperature == 0 {
			next = mlx.Argmax(logits, -1, false)
		} else {
			sub, err := keys.Next()
			if err != nil {
				ss.Close()
				return nil, err
			}
			next = mlx.Categorical(mlx.Divide(logits, mlx.Scalar(float32(o.Temperature), mlx.Float32)), -1, sub)
		}
		lp := mlx.Subtract(logits, mlx.LogSumExp(logits, []int{-1}, true))
		cur := mlx.TakeAlongAxis(lp, mlx.Reshape(mlx.AsType(next, mlx.Int32), n, 1), -1)
		ids, err := mlx.AsType(next, mlx.Int32).Int32s()
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("whisper decoder: %w", err)
		}
		cv, err := cur.Float32s()
		ss.Close()
		if err != nil {
			return nil, fmt.Errorf("whisper decoder: %w", err)
		}
		allEnded := true
		for k, id := range ids {
			// sum_logprobs += current_logprobs * (tokens[:, -1] != eot)
			if rows[k][len(rows[k])-1] != t.EOT {
				sums[k] += cv[k] * 1
			} else {
				sums[k] += cv[k] * 0
				id = t.EOT
			}
			rows[k] = append(rows[k], id)
			allEnded = allEnded && id == t.EOT
		}
		if o.Trace != nil {
			o.Trace(step, traced, rows[0][len(rows[0])-1])
		}
		if allEnded {
			// mlx-whisper builds the next step before it sees the end
			// (unless the loop ends first): its categorical draws a key.
			if o.Temperature > 0 && step+1 < sampleLen && len(rows[0]) <= dims.NTextCtx {
				ks := mlx.NewScope()
				_, err := keys.Next()
				ks.Close()
				if err != nil {
					return nil, err
				}
			}
			break
		}
		inputs, inLen = lastTokens(rows), 1
	}
	// The candidates: beam search's finished sequences (topped up with the
	// best unfinished), or every row of the group; each from the first
	// sampled token to the first <|endoftext|>.
	var cands [][]int32
	var scores []float32
	if beam != nil {
		cands, scores = beam.finalize(rows, sums)
	} else {
		cands, scores = rows, sums
	}
	for i, c := range cands {
		c = c[sampleBegin:]
		if e := slices.Index(c, t.EOT); e >= 0 {
			c = c[:e]
		}
		cands[i] = slices.Clone(c)
	}
	best := rankCandidates(cands, scores, o.LengthPenalty)
	out := cands[best]
	text := trimSpace(t.Decode(out))
	return &DecodeResult{
		Tokens:           out,
		Text:             text,
		AvgLogprob:       float64(scores[best]) / float64(len(out)+1),
		NoSpeechProb:     noSpeech,
		Temperature:      o.Temperature,
		CompressionRatio: compressionRatio(text),
	}, nil
}

func lastTokens(rows [][]int32) []int32 {
	out := make([]int32, len(rows))
	for i, r := range rows {
		out[i] = r[len(r)-1]
	}
	return out
}

// trimSpace is Python's str.strip(): Unicode white space and the ASCII
// separators \x1c-\x1f.
func trimSpace(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f })
}

func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}

// LanguageResult is detect_language's answer for one window.
type LanguageResult struct {
	// Language is the most probable language (max over Probs, the first
	// of equals, as transcribe()'s max(probs, key=probs.get)).
	Language string
	// Probs are the probabilities of the model's languages in
	// LanguageTokens' order (softmax over the language tokens alone).
	Probs []float64
	// Logits are the decoder's logits at the <|startoftranscript|>
	// position, before the language mask (float32 view, for the oracle test).
	Logits []float32
}

// DetectLanguage is mlx-whisper's detect_language on one 30-second mel
// window [3000, n_mels]: the encoder, then the decoder on
// <|startoftranscript|> alone, its logits masked to the language tokens
// (a float32 mask of 0 and -inf added), softmax. Multilingual models only.
// Call it on the executor.
func (d *Decoder) DetectLanguage(mel []float32) (*LanguageResult, error) {
	langs := d.Tok.LanguageTokens()
	if len(langs) == 0 {
		return nil, fmt.Errorf("this model is English-only: it has no language tokens to detect a language with")
	}
	s := mlx.NewScope()
	defer s.Close()
	dims := d.M.Dims
	x := mlx.AsType(mlx.FromSlice(mel, 1, 2*dims.NAudioCtx, dims.NMels), d.M.Activation)
	audio := d.M.Encode(x)
	var cache Cache
	defer cache.Free()
	pre := d.M.Decode(mlx.FromSlice([]int32{d.Tok.SOT}, 1, 1), audio, &cache)
	row := mlx.Reshape(mlx.Slice(pre, []int{0, 0, 0}, []int{1, 1, dims.NVocab}), 1, dims.NVocab)
	mask := make([]float32, dims.NVocab)
	fill(mask, float32(math.Inf(-1)))
	for _, id := range langs {
		mask[id] = 0
	}
	masked := mlx.Add(row, mlx.FromSlice(mask, 1, dims.NVocab))
	probs := mlx.Softmax(masked, []int{-1}, false)
	logits, err := mlx.AsType(row, mlx.Float32).Float32s()
	if err != nil {
		return nil, fmt.Errorf("whisper language detection: %w", err)
	}
	p, err := probs.Float32s()
	if err != nil {
		return nil, fmt.Errorf("whisper language detection: %w", err)
	}
	r := &LanguageResult{Logits: logits, Probs: make([]float64, len(langs))}
	best := -1
	for i, id := range langs {
		r.Probs[i] = float64(p[id])
		if best < 0 || r.Probs[i] > r.Probs[best] {
			best = i
		}
	}
	r.Language = Languages[best]
	return r, nil
}
