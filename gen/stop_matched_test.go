package gen

import "testing"

// TestStopMatcherMatched: Matched names the stop string that ended
// generation (Anthropic's stop_sequence), "" when none did.
func TestStopMatcherMatched(t *testing.T) {
	for _, tc := range []struct {
		stops  []string
		chunks []string
		want   string
	}{
		{[]string{"END"}, []string{"hello E", "N", "D tail"}, "END"},
		{[]string{"END", "N"}, []string{"00END"}, "N"},
		{[]string{"D", "END"}, []string{"00END"}, "END"},
		{[]string{"END"}, []string{"no stop"}, ""},
	} {
		m := NewStopMatcher(tc.stops)
		feed(m, tc.chunks)
		if m.Matched() != tc.want {
			t.Errorf("stops %q, chunks %q: matched %q, want %q", tc.stops, tc.chunks, m.Matched(), tc.want)
		}
	}
}
