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
	Seed                      uint64
	// Window, when set, is called after each decoded window (progress).
	Window func(seek, frames int)
	// Trace is passed to every window's decoding (oracle tests); attempt
	// counts decodings, fallbacks included.
	Trace func(attempt, step int, logits []float32, token int32)
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
}

// Result is a whole transcription.
type Result struct {
	Text     string    `json:"text"`
	Segments []Segment `json:"segments"`
	Language string    `json:"language"`
	Duration float64   `json:"duration"`
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
	t := d.Tok
	var err error
	contentFrames := mel.Frames - audio.NFrames
	res := &Result{Language: t.Language, Duration: duration, Segments: []Segment{}}
	attempts := 0
	inputStride := audio.NFrames / d.M.Dims.NAudioCtx // 2 mel frames per token
	timePrecision := float64(inputStride*audio.HopLength) / audio.SampleRate
	var allTokens []int32
	promptResetSince := 0
	var initialPrompt []int32
	if o.InitialPrompt != "" {
		if initialPrompt, err = t.Encode(" " + trimSpace(o.InitialPrompt)); err != nil {
			return nil, fmt.Errorf("cannot encode the prompt: %w", err)
		}
		allTokens = append(allTokens, initialPrompt...)
	}
	temps := o.Temperatures
	if len(temps) == 0 {
		temps = []float64{0}
	}
	seek := 0
	for seek < contentFrames {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		timeOffset := float64(seek*audio.HopLength) / audio.SampleRate
		segmentSize := min(audio.NFrames, contentFrames-seek)
		segmentDuration := float64(segmentSize*audio.HopLength) / audio.SampleRate
		window := mel.Window(seek, segmentSize)
		prompt := slices.Clone(allTokens[promptResetSince:])
		var r *DecodeResult
		for i, temp := range temps {
			win := attempts
			attempts++
			do := DecodeOptions{Temperature: temp, Prompt: prompt, WithoutTimestamps: o.WithoutTimestamps, Seed: o.Seed + uint64(res.Windows)*1000 + uint64(i)}
			if o.Trace != nil {
				do.Trace = func(step int, logits []float32, tok int32) { o.Trace(win, step, logits, tok) }
			}
			if r, err = d.DecodeWindow(window, do); err != nil {
				return nil, err
			}
			if i > 0 {
				res.Fallbacks++
			}
			needsFallback := false
			if o.CompressionRatioThreshold > 0 && r.CompressionRatio > o.CompressionRatioThreshold {
				needsFallback = true // too repetitive
			}
			if !math.IsNaN(o.LogprobThreshold) && r.AvgLogprob < o.LogprobThreshold {
				needsFallback = true // average log probability too low
			}
			if !math.IsNaN(o.NoSpeechThreshold) && r.NoSpeechProb > o.NoSpeechThreshold {
				needsFallback = false // silence
			}
			if !needsFallback {
				break
			}
		}
		res.Windows++
		if !math.IsNaN(o.NoSpeechThreshold) {
			skip := r.NoSpeechProb > o.NoSpeechThreshold
			if !math.IsNaN(o.LogprobThreshold) && r.AvgLogprob > o.LogprobThreshold {
				skip = false
			}
			if skip {
				seek += segmentSize // fast-forward to the next window
				if o.Window != nil {
					o.Window(seek, contentFrames)
				}
				continue
			}
		}
		tokens := r.Tokens
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
				Temperature: r.Temperature, AvgLogprob: r.AvgLogprob, CompressionRatio: r.CompressionRatio, NoSpeechProb: r.NoSpeechProb,
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
		for i := range current {
			if current[i].Start == current[i].End || trimSpace(current[i].Text) == "" {
				current[i].Text, current[i].Tokens = "", []int32{}
			}
		}
		for i := range current {
			current[i].ID = len(res.Segments)
			res.Segments = append(res.Segments, current[i])
			allTokens = append(allTokens, current[i].Tokens...)
		}
		if o.NoConditionOnPreviousText || r.Temperature > 0.5 {
			promptResetSince = len(allTokens)
		}
		if o.Window != nil {
			o.Window(min(seek, contentFrames), contentFrames)
		}
	}
	res.Text = t.Decode(allTokens[len(initialPrompt):])
	return res, nil
}
