package gen

import (
	"errors"
	"strings"
	"testing"
)

// pieces is a Detokenizer whose token i is text[i]; it holds back the last
// piece until the next one or Flush, as a byte-level detokenizer holds an
// incomplete character.
type pieces struct {
	text []string
	held string
}

func (p *pieces) Next(id int32) string {
	out := p.held
	p.held = p.text[id]
	return out
}

func (p *pieces) Flush() string {
	out := p.held
	p.held = ""
	return out
}

// TestTextStream: text comes out as the detokenizer makes it final, a stop
// string ends it (never shown), and Finish gives what was held back.
func TestTextStream(t *testing.T) {
	text := []string{"Hello", " wor", "ld", "!", " END", " more"}
	for _, tc := range []struct {
		name  string
		stops []string
		want  string
		stop  bool
	}{
		{"no stops", nil, "Hello world! END more", false},
		{"stop string", []string{"END"}, "Hello world! ", true},
		{"stop across tokens", []string{"world"}, "Hello ", true},
		{"stop never seen", []string{"xyz"}, "Hello world! END more", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewTextStream(&pieces{text: text}, NewStopMatcher(tc.stops))
			var out strings.Builder
			stopped := false
			for id := range text {
				piece, err := s.Token(int32(id))
				out.WriteString(piece)
				if errors.Is(err, ErrStop) {
					stopped = true
					break
				}
			}
			out.WriteString(s.Finish())
			if out.String() != tc.want || stopped != tc.stop || s.Stops().Stopped() != tc.stop {
				t.Fatalf("text %q, stopped %v; want %q, %v", out.String(), stopped, tc.want, tc.stop)
			}
		})
	}
}
