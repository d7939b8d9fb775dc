package gen

import (
	"strings"
	"testing"
)

// feed pushes chunks through a matcher and returns what it let out.
func feed(m *StopMatcher, chunks []string) (string, bool) {
	var b strings.Builder
	for _, c := range chunks {
		out, stop := m.Push(c)
		b.WriteString(out)
		if stop {
			return b.String(), true
		}
	}
	b.WriteString(m.Flush())
	return b.String(), false
}

func TestStopMatcher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stops  []string
		chunks []string
		want   string
		stop   bool
	}{
		{"no stops", nil, []string{"a", "b"}, "ab", false},
		{"empty stop ignored", []string{""}, []string{"ab"}, "ab", false},
		{"whole chunk", []string{"END"}, []string{"hello ", "END", " more"}, "hello ", true},
		{"split across chunks", []string{"END"}, []string{"hello E", "N", "D tail"}, "hello ", true},
		{"false start released", []string{"END"}, []string{"hello E", "N", "x"}, "hello ENx", false},
		{"first completed of two", []string{"cd", "b"}, []string{"abcd"}, "a", true},
		{"first completed wins over earlier start", []string{"END", "N"}, []string{"00END"}, "00E", true},
		{"longest on the same end", []string{"D", "END"}, []string{"00END"}, "00", true},
		{"overlapping prefix", []string{"aab"}, []string{"a", "a", "a", "b", "c"}, "a", true},
		{"held back then flushed", []string{"\n\n"}, []string{"line\n"}, "line\n", false},
		{"multibyte", []string{"é!"}, []string{"caf", "é", "!"}, "caf", true},
		{"stop at start", []string{"<|"}, []string{"<", "|im_end|>"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stop := feed(NewStopMatcher(tc.stops), tc.chunks)
			if got != tc.want || stop != tc.stop {
				t.Fatalf("got %q stop=%v, want %q stop=%v", got, stop, tc.want, tc.stop)
			}
		})
	}
}

// TestStopMatcherHoldsBackOnlyPrefixes checks that text that cannot start a
// stop string is let out at once: streaming must not lag behind.
func TestStopMatcherHoldsBackOnlyPrefixes(t *testing.T) {
	m := NewStopMatcher([]string{"STOP"})
	for _, tc := range []struct{ in, out string }{
		{"abc", "abc"}, {"xS", "x"}, {"T", ""}, {"Oy", "STOy"}, {"ST", ""},
	} {
		if out, _ := m.Push(tc.in); out != tc.out {
			t.Fatalf("Push(%q) = %q, want %q", tc.in, out, tc.out)
		}
	}
	if rest := m.Flush(); rest != "ST" {
		t.Fatalf("Flush = %q, want %q", rest, "ST")
	}
}

// FuzzStopMatcher: for any text, stops and chunking, the output is exactly the
// text before the earliest stop occurrence (or all of it), never more.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello END world", "END", "x", uint8(3))
	f.Add("aaab", "aab", "b", uint8(1))
	f.Add("</s>", "</s>", "", uint8(2))
	f.Fuzz(func(t *testing.T, text, s1, s2 string, step uint8) {
		n := int(step%7) + 1
		var chunks []string
		for i := 0; i < len(text); i += n {
			chunks = append(chunks, text[i:min(i+n, len(text))])
		}
		got, stop := feed(NewStopMatcher([]string{s1, s2}), chunks)
		// The reference: the first position where a stop string is complete.
		want, wantStop := text, false
	scan:
		for e := 1; e <= len(text); e++ {
			best := -1
			for _, s := range []string{s1, s2} {
				if s != "" && strings.HasSuffix(text[:e], s) && (best < 0 || e-len(s) < best) {
					best = e - len(s)
				}
			}
			if best >= 0 {
				want, wantStop = text[:best], true
				break scan
			}
		}
		if got != want || stop != wantStop {
			t.Fatalf("text %q stops %q %q by %d: got %q stop=%v, want %q stop=%v", text, s1, s2, n, got, stop, want, wantStop)
		}
	})
}
