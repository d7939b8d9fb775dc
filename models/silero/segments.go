package silero

import "math"

// Params are get_speech_timestamps' arguments (silero-vad 5.1.2), with its
// defaults from DefaultParams.
type Params struct {
	Threshold        float64 // speech at or above this probability
	NegThreshold     float64 // silence below this while in speech (NaN: Threshold − 0.15)
	MinSpeechMS      int
	MaxSpeechSeconds float64 // +Inf: no cut
	MinSilenceMS     int
	SpeechPadMS      int
}

// DefaultParams are get_speech_timestamps' defaults.
func DefaultParams() Params {
	return Params{Threshold: 0.5, NegThreshold: math.NaN(), MinSpeechMS: 250, MaxSpeechSeconds: math.Inf(1), MinSilenceMS: 100, SpeechPadMS: 30}
}

// Span is one speech segment in samples: [Start, End).
type Span struct{ Start, End int }

// SpeechTimestamps is silero-vad 5.1.2's get_speech_timestamps at 16 kHz
// over the frame probabilities of n samples (Probs), line for line: the
// same float thresholds in samples, the same integer padding.
func SpeechTimestamps(probs []float32, n int, p Params) []Span {
	const w = FrameSize
	sr := float64(SampleRate)
	minSpeech := sr * float64(p.MinSpeechMS) / 1000
	pad := sr * float64(p.SpeechPadMS) / 1000
	maxSpeech := sr*p.MaxSpeechSeconds - w - 2*pad
	minSilence := sr * float64(p.MinSilenceMS) / 1000
	minSilenceAtMax := sr * 98 / 1000
	neg := p.NegThreshold
	if math.IsNaN(neg) {
		neg = p.Threshold - 0.15
	}
	var speeches []Span
	triggered := false
	cur, have := Span{}, false
	tempEnd, prevEnd, nextStart := 0, 0, 0
	for i, pr := range probs {
		prob := float64(pr)
		if prob >= p.Threshold && tempEnd != 0 {
			tempEnd = 0
			if nextStart < prevEnd {
				nextStart = w * i
			}
		}
		if prob >= p.Threshold && !triggered {
			triggered = true
			cur, have = Span{Start: w * i}, true
			continue
		}
		if triggered && float64(w*i-cur.Start) > maxSpeech {
			if prevEnd != 0 {
				cur.End = prevEnd
				speeches = append(speeches, cur)
				cur, have = Span{}, false
				if nextStart < prevEnd {
					triggered = false
				} else {
					cur, have = Span{Start: nextStart}, true
				}
				prevEnd, nextStart, tempEnd = 0, 0, 0
			} else {
				cur.End = w * i
				speeches = append(speeches, cur)
				cur, have = Span{}, false
				prevEnd, nextStart, tempEnd = 0, 0, 0
				triggered = false
				continue
			}
		}
		if prob < neg && triggered {
			if tempEnd == 0 {
				tempEnd = w * i
			}
			if float64(w*i-tempEnd) > minSilenceAtMax {
				prevEnd = tempEnd
			}
			if float64(w*i-tempEnd) < minSilence {
				continue
			}
			cur.End = tempEnd
			if float64(cur.End-cur.Start) > minSpeech {
				speeches = append(speeches, cur)
			}
			cur, have = Span{}, false
			prevEnd, nextStart, tempEnd = 0, 0, 0
			triggered = false
			continue
		}
	}
	if have && float64(n-cur.Start) > minSpeech {
		cur.End = n
		speeches = append(speeches, cur)
	}
	for i := range speeches {
		s := &speeches[i]
		if i == 0 {
			s.Start = int(math.Max(0, float64(s.Start)-pad))
		}
		if i != len(speeches)-1 {
			next := &speeches[i+1]
			silence := next.Start - s.End
			if float64(silence) < 2*pad {
				s.End += floorDiv(silence, 2)
				next.Start = max(0, next.Start-floorDiv(silence, 2))
			} else {
				s.End = int(math.Min(float64(n), float64(s.End)+pad))
				next.Start = int(math.Max(0, float64(next.Start)-pad))
			}
		} else {
			s.End = int(math.Min(float64(n), float64(s.End)+pad))
		}
	}
	return speeches
}

// floorDiv is Python's // on integers.
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
