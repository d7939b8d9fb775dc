package gen

// Detokenizer turns generated token ids into text as it becomes final;
// tok.Detokenizer satisfies it.
type Detokenizer interface {
	Next(id int32) string // the text id makes final, maybe ""
	Flush() string        // what is left once generation has ended
}

// TextStream is one generation's text as it may be shown: each token
// detokenized, and text that may still become a stop string held back.
// `mlxgo generate` and `mlxgo serve` both stream through it, the one
// detokenize + stop-string path of both.
type TextStream struct {
	detok Detokenizer
	stops *StopMatcher
}

// NewTextStream returns the stream of d's text stopping at stops (a
// matcher with no stop strings holds nothing back).
func NewTextStream(d Detokenizer, stops *StopMatcher) *TextStream {
	if stops == nil {
		stops = NewStopMatcher(nil)
	}
	return &TextStream{detok: d, stops: stops}
}

// Token is an emit step: the text id makes safe to show, and ErrStop once
// a stop string has ended the text (the text before it is returned with
// it).
func (s *TextStream) Token(id int32) (string, error) {
	text, stop := s.stops.Push(s.detok.Next(id))
	if stop {
		return text, ErrStop
	}
	return text, nil
}

// Finish is the text still held back, final once generation has ended
// without a stop string; after a stop string it is "".
func (s *TextStream) Finish() string {
	if s.stops.Stopped() {
		return ""
	}
	text, _ := s.stops.Push(s.detok.Flush())
	return text + s.stops.Flush()
}

// Stops is the stream's stop matcher (which stop string ended it, if any).
func (s *TextStream) Stops() *StopMatcher { return s.stops }
