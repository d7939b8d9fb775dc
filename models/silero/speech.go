package silero

import "math"

// Speech is audio cut to its speech spans and joined, with the map from
// the joined clock back to the original one (faster-whisper's
// SpeechTimestampsMap): Whisper transcribes Samples, and each segment time
// is moved back by Original.
type Speech struct {
	Samples []float32
	Spans   []Span
	ends    []int // each span's end in the joined clock
}

// Cut joins samples[s.Start:s.End] of every span.
func Cut(samples []float32, spans []Span) *Speech {
	sp := &Speech{Spans: spans}
	for _, s := range spans {
		sp.Samples = append(sp.Samples, samples[s.Start:s.End]...)
		sp.ends = append(sp.ends, len(sp.Samples))
	}
	return sp
}

// Original maps t seconds of the joined audio to the original clock. A
// time on the boundary of two spans is the end of the first when isEnd
// and the start of the second otherwise.
func (s *Speech) Original(t float64, isEnd bool) float64 {
	if len(s.Spans) == 0 {
		return t
	}
	x := int(math.Round(t * SampleRate))
	i := 0
	for i < len(s.ends)-1 && (x > s.ends[i] || !isEnd && x == s.ends[i]) {
		i++
	}
	begin := s.ends[i] - (s.Spans[i].End - s.Spans[i].Start)
	return float64(s.Spans[i].Start+x-begin) / SampleRate
}
