package whisper

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// Options are mlx-whisper transcribe()'s arguments that mlxgo honours, with
// its defaults from DefaultOptions.
type Options struct {
	// Temperatures are tried in order until a window's result passes the
	// thresholds (temperature fallback).
	Temperatures              []float64
	CompressionRatioThreshold float64 // 0 turns the check off
	LogprobThreshold          float64 // NaN turns the check off
	NoSpeechThreshold         float64 // NaN turns the check off
	NoConditionOnPreviousText bool
	InitialPrompt             string
	WithoutTimestamps         bool
	// DetectLanguage, on a multilingual model, replaces the decoder's
	// language with detect_language's on the first 30 s (mlx-whisper's
	// transcribe() with language None); the task stays the tokenizer's.
	DetectLanguage bool
	// WordTimestamps adds each segment's words, timed by the
	// cross-attention of the alignment heads and DTW (add_word_timestamps),
	// and seeks from the last word's end, as mlx-whisper does.
	WordTimestamps bool
	// Seed is mx.random.seed(Seed) before mlx-whisper's transcribe(): one
	// key sequence for every sampled decoding of the transcription.
	Seed uint64
	// BeamSize, Patience: beam search at temperature 0 (DecodeOptions);
	// BestOf: samples per decoding at temperature > 0; LengthPenalty: how
	// either ranks its candidates (nil: length normalisation).
	BeamSize      int
	Patience      float64
	BestOf        int
	LengthPenalty *float64
	// Window, when set, is called after each decoded window (progress).
	Window func(seek, frames int)
	// Trace is passed to every window's decoding (oracle tests); attempt
	// counts decodings, fallbacks included.
	Trace func(attempt, step int, logits []float32, token int32)
	// Decoded, when set, receives each decoding's result (fallbacks
	// included), numbered as Trace's attempts.
	Decoded func(attempt int, r *DecodeResult)
}

// DefaultOptions are mlx-whisper's transcribe() defaults.
func DefaultOptions() Options {
	return Options{
		Temperatures:              []float64{0, 0.2, 0.4, 0.6, 0.8, 1.0},
		CompressionRatioThreshold: 2.4,
		LogprobThreshold:          -1,
		NoSpeechThreshold:         0.6,
	}
}

// Temperatures is the fallback schedule from start by increment up to 1:
// np.arange(start, 1 + 1e-6, increment) as mlx-whisper's command line
// builds it (increment 0: start alone).
func Temperatures(start, increment float64) []float64 {
	if increment <= 0 {
		return []float64{start}
	}
	var ts []float64
	for i := 0; ; i++ {
		t := start + float64(i)*increment
		if t >= 1+1e-6 {
			break
		}
		ts = append(ts, t)
	}
	return ts
}

// Segment is one transcribed segment (mlx-whisper's segment dict).
type Segment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int32 `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
	// Words are the segment's words with their times (WordTimestamps).
	Words []Word `json:"words,omitempty"`
}

// Result is a whole transcription.
type Result struct {
	Text     string    `json:"text"`
	Segments []Segment `json:"segments"`
	Language string    `json:"language"`
	Duration float64   `json:"duration"`
	// Detected is the language detection's result (nil when the
	// language was given or the model is English-only).
	Detected *LanguageResult `json:"-"`
	// Windows counts the decoded 30 s windows, Fallbacks the decodings
	// retried at a higher temperature.
	Windows, Fallbacks int `json:"-"`
}

// Transcribe is mlx-whisper's transcribe() on 16 kHz mono samples: the log-mel
// of the whole clip plus 30 s of silence, then window by window from seek 0,
// each window decoded with temperature fallback and cut into segments at
// pairs of timestamp tokens; the next window starts at the last timestamp
// (or after the whole window when it ends on a single timestamp or has
// none). No word timestamps, clip_timestamps or hallucination_silence_threshold.
// Call it on the executor.
func (d *Decoder) Transcribe(ctx context.Context, samples []float32, o Options) (*Result, error) {
	mel, err := audio.LogMel(samples, d.M.Dims.NMels, audio.NSamples)
	if err != nil {
		return nil, err
	}
	return d.TranscribeMel(ctx, mel, float64(len(samples))/audio.SampleRate, o)
}

// TranscribeMel is Transcribe from the log-mel of the clip plus 30 s of
// silence (audio.LogMel with padding audio.NSamples); duration is the clip's
// length in seconds.
func (d *Decoder) TranscribeMel(ctx context.Context, mel *audio.Mel, duration float64, o Options) (*Result, error) {
	r, err := d.StartMel(mel, duration, o)
	if err != nil {
		return nil, err
	}
	for {
		done, err := r.Step(ctx)
		if err != nil {
			return nil, err
		}
		if done {
			return r.Result(), nil
		}
	}
}

// Run is one transcription in progress: Transcribe's loop, a window at a
// time, so that a server can run other work between windows.
type Run struct {
	d             *Decoder
	mel           *audio.Mel
	o             Options
	res           *Result
	temps         []float64
	contentFrames int
	seek          int
	attempts      int
	// allTokens is every segment's tokens after the initial prompt's;
	// windows are prompted from promptResetSince on.
	allTokens        []int32
	promptResetSince int
	initialPrompt    []int32
	keys             *KeySequence // made at the first sampled decoding
	lastSpeech       float64      // last_speech_timestamp (word timestamps)
}

// Start computes the log-mel of 16 kHz mono samples (plus 30 s of silence)
// and returns the transcription ready for its first window. Call it on the
// executor.
func (d *Decoder) Start(samples []float32, o Options) (*Run, error) {
	mel, err := audio.LogMel(samples, d.M.Dims.NMels, audio.NSamples)
	if err != nil {
		return nil, err
	}
	return d.StartMel(mel, float64(len(samples))/audio.SampleRate, o)
}

// StartMel is Start from a log-mel already computed (see TranscribeMel).
func (d *Decoder) StartMel(mel *audio.Mel, duration float64, o Options) (*Run, error) {
	var detected *LanguageResult
	if o.DetectLanguage && d.Tok.Multilingual() {
		// pad_or_trim(mel, N_FRAMES): the first 30 s of the clip + its padding.
		var err error
		if detected, err = d.DetectLanguage(mel.Window(0, audio.NFrames)); err != nil {
			return nil, err
		}
		tk, err := d.Tok.WithTask(detected.Language, d.Tok.Task)
		if err != nil {
			return nil, err
		}
		dd := *d
		dd.Tok = tk
		d = &dd
	}
	r := &Run{d: d, mel: mel, o: o, contentFrames: mel.Frames - audio.NFrames, temps: o.Temperatures,
		res: &Result{Language: d.Tok.Language, Duration: duration, Segments: []Segment{}, Detected: detected}}
	if o.InitialPrompt != "" {
		var err error
		if r.initialPrompt, err = d.Tok.Encode(" " + trimSpace(o.InitialPrompt)); err != nil {
			return nil, fmt.Errorf("cannot encode the prompt: %w", err)
		}
		r.allTokens = append(r.allTokens, r.initialPrompt...)
	}
	if len(r.temps) == 0 {
		r.temps = []float64{0}
	}
	return r, nil
}

// Result is the transcription so far; after the last Step, the whole one.
func (r *Run) Result() *Result {
	r.res.Text = r.d.Tok.Decode(r.allTokens[len(r.initialPrompt):])
	return r.res
}

// Close frees the random state; Step calls it at the end and on an error,
// and a caller that abandons a Run calls it (on the executor).
func (r *Run) Close() {
	r.keys.Free()
	r.keys = nil
}

// Step decodes the next window (with temperature fallback) and reports
// whether the transcription is done. Call it on the executor.
func (r *Run) Step(ctx context.Context) (bool, error) {
	if r.seek >= r.contentFrames {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		r.Close()
		return true, err
	}
	if err := r.window(); err != nil {
		r.Close()
		return true, err
	}
	if r.seek >= r.contentFrames {
		r.Close()
		return true, nil
	}
	return false, nil
}

// window is one iteration of mlx-whisper's transcribe loop.
func (r *Run) window() error {
	d, o, res, t, mel := r.d, r.o, r.res, r.d.Tok, r.mel
	contentFrames, seek := r.contentFrames, r.seek
	defer func() {
		r.seek = seek
		if o.Window != nil {
			o.Window(min(seek, contentFrames), contentFrames)
		}
	}()
	inputStride := audio.NFrames / d.M.Dims.NAudioCtx // 2 mel frames per token
	timePrecision := float64(inputStride*audio.HopLength) / audio.SampleRate
	var err error
	timeOffset := float64(seek*audio.HopLength) / audio.SampleRate
	segmentSize := min(audio.NFrames, contentFrames-seek)
	segmentDuration := float64(segmentSize*audio.HopLength) / audio.SampleRate
	window := mel.Window(seek, segmentSize)
	prompt := slices.Clone(r.allTokens[r.promptResetSince:])
	var dr *DecodeResult
	for i, temp := range r.temps {
		win := r.attempts
		r.attempts++
		if temp > 0 && r.keys == nil {
			r.keys = NewKeySequence(o.Seed)
		}
		do := DecodeOptions{Temperature: temp, Prompt: prompt, WithoutTimestamps: o.WithoutTimestamps, Keys: r.keys,
			BeamSize: o.BeamSize, Patience: o.Patience, BestOf: o.BestOf, LengthPenalty: o.LengthPenalty}
		if o.Trace != nil {
			do.Trace = func(step int, logits []float32, tok int32) { o.Trace(win, step, logits, tok) }
		}
		if dr, err = d.DecodeWindow(window, do); err != nil {
			return err
		}
		if o.Decoded != nil {
			o.Decoded(win, dr)
		}
		if i > 0 {
			res.Fallbacks++
		}
		needsFallback := false
		if o.CompressionRatioThreshold > 0 && dr.CompressionRatio > o.CompressionRatioThreshold {
			needsFallback = true // too repetitive
		}
		if !math.IsNaN(o.LogprobThreshold) && dr.AvgLogprob < o.LogprobThreshold {
			needsFallback = true // average log probability too low
		}
		if !math.IsNaN(o.NoSpeechThreshold) && dr.NoSpeechProb > o.NoSpeechThreshold {
			needsFallback = false // silence
		}
		if !needsFallback {
			break
		}
	}
	res.Windows++
	if !math.IsNaN(o.NoSpeechThreshold) {
		skip := dr.NoSpeechProb > o.NoSpeechThreshold
		if !math.IsNaN(o.LogprobThreshold) && dr.AvgLogprob > o.LogprobThreshold {
			skip = false
		}
		if skip {
			seek += segmentSize // fast-forward to the next window
			return nil
		}
	}
	tokens := dr.Tokens
	isTS := func(i int) bool { return tokens[i] >= t.TimestampBegin }
	n := len(tokens)
	singleEnding := n >= 2 && !isTS(n-2) && isTS(n-1)
	var consecutive []int
	for i := 0; i+1 < n; i++ {
		if isTS(i) && isTS(i+1) {
			consecutive = append(consecutive, i+1)
		}
	}
	newSegment := func(start, end float64, toks []int32) Segment {
		var text []int32
		for _, id := range toks {
			if id < t.EOT {
				text = append(text, id)
			}
		}
		return Segment{
			Seek: seek, Start: start, End: end, Text: t.Decode(text), Tokens: slices.Clone(toks),
			Temperature: dr.Temperature, AvgLogprob: dr.AvgLogprob, CompressionRatio: dr.CompressionRatio, NoSpeechProb: dr.NoSpeechProb,
		}
	}
	var current []Segment
	if len(consecutive) > 0 {
		slicesAt := consecutive
		if singleEnding {
			slicesAt = append(slicesAt, n)
		}
		last := 0
		for _, cur := range slicesAt {
			st := tokens[last:cur]
			startPos := float64(st[0] - t.TimestampBegin)
			endPos := float64(st[len(st)-1] - t.TimestampBegin)
			current = append(current, newSegment(timeOffset+startPos*timePrecision, timeOffset+endPos*timePrecision, st))
			last = cur
		}
		if singleEnding {
			seek += segmentSize
		} else {
			seek += int(tokens[last-1]-t.TimestampBegin) * inputStride
		}
	} else {
		duration := segmentDuration
		var stamps []int32
		for _, id := range tokens {
			if id >= t.TimestampBegin {
				stamps = append(stamps, id)
			}
		}
		if len(stamps) > 0 && stamps[len(stamps)-1] != t.TimestampBegin {
			duration = float64(stamps[len(stamps)-1]-t.TimestampBegin) * timePrecision
		}
		current = append(current, newSegment(timeOffset, timeOffset+duration, tokens))
		seek += segmentSize
	}
	if o.WordTimestamps {
		if err := d.addWordTimestamps(current, window, segmentSize, r.lastSpeech); err != nil {
			return err
		}
		if end, ok := lastEnd(current); ok && !singleEnding && end > timeOffset {
			seek = int(math.RoundToEven(end * audio.SampleRate / audio.HopLength))
		}
		if end, ok := lastEnd(current); ok {
			r.lastSpeech = end
		}
	}
	for i := range current {
		if current[i].Start == current[i].End || trimSpace(current[i].Text) == "" {
			current[i].Text, current[i].Tokens = "", []int32{}
			if current[i].Words != nil {
				current[i].Words = []Word{}
			}
		}
	}
	for i := range current {
		current[i].ID = len(res.Segments)
		res.Segments = append(res.Segments, current[i])
		r.allTokens = append(r.allTokens, current[i].Tokens...)
	}
	if o.NoConditionOnPreviousText || dr.Temperature > 0.5 {
		r.promptResetSince = len(r.allTokens)
	}
	return nil
}

// lastEnd is transcribe.py's _get_end: the end of the last word, else of
// the last segment.
func lastEnd(segs []Segment) (float64, bool) {
	for i := len(segs) - 1; i >= 0; i-- {
		if w := segs[i].Words; len(w) > 0 {
			return w[len(w)-1].End, true
		}
	}
	if len(segs) == 0 {
		return 0, false
	}
	return segs[len(segs)-1].End, true
}
