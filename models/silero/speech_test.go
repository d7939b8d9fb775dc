package silero

import "testing"

// TestSpeechOriginal: times in the joined speech map back into their span;
// a time on a boundary is the first span's end or the second's start.
func TestSpeechOriginal(t *testing.T) {
	x := make([]float32, 10*SampleRate)
	sp := Cut(x, []Span{{Start: 1 * SampleRate, End: 2 * SampleRate}, {Start: 5 * SampleRate, End: 7 * SampleRate}})
	if len(sp.Samples) != 3*SampleRate {
		t.Fatalf("%d samples joined, want %d", len(sp.Samples), 3*SampleRate)
	}
	for _, tc := range []struct {
		t     float64
		isEnd bool
		want  float64
	}{{0, false, 1}, {0.5, false, 1.5}, {1, true, 2}, {1, false, 5}, {2.5, true, 6.5}, {3, true, 7}} {
		if got := sp.Original(tc.t, tc.isEnd); got != tc.want {
			t.Errorf("Original(%v, %v) = %v, want %v", tc.t, tc.isEnd, got, tc.want)
		}
	}
	if got := Cut(x, nil).Original(1.5, false); got != 1.5 {
		t.Errorf("no spans: %v, want the time itself", got)
	}
}
