package whisper

import (
	"slices"
	"testing"
)

// TestMedianFilterReflect: timing.py's median_filter pads by reflection
// (no edge repeat) before scipy's medfilt; worked by hand for width 3.
func TestMedianFilterReflect(t *testing.T) {
	x := []float32{1, 5, 2, 8, 3, 9, 4}
	medianFilter(x, 1, len(x), 3)
	if want := []float32{5, 2, 5, 3, 8, 4, 9}; !slices.Equal(x, want) {
		t.Fatalf("median filter %v, want %v", x, want)
	}
	short := []float32{3, 1}
	medianFilter(short, 1, 2, 7) // shorter than the padding: unchanged
	if !slices.Equal(short, []float32{3, 1}) {
		t.Fatalf("short row %v changed", short)
	}
}

// TestDTWPath: dtw_cpu's path on a 2×3 cost, worked by hand (ties move
// along time).
func TestDTWPath(t *testing.T) {
	text, time := dtw([]float32{0, 1, 1, 1, 0, 0}, 2, 3)
	if !slices.Equal(text, []int{0, 1, 1}) || !slices.Equal(time, []int{0, 1, 2}) {
		t.Fatalf("path text %v time %v, want [0 1 1] [0 1 2]", text, time)
	}
}

// TestMergePunctuations: a spaced opening quote joins the next word, a
// comma the previous one, as merge_punctuations does.
func TestMergePunctuations(t *testing.T) {
	al := []wordTiming{{word: ` "`, tokens: []int32{1}}, {word: "Hi", tokens: []int32{2}}, {word: ",", tokens: []int32{3}}, {word: " there", tokens: []int32{4}}}
	mergePunctuations(al)
	var words []string
	for _, w := range al {
		words = append(words, w.word)
	}
	if want := []string{"", ` "Hi,`, "", " there"}; !slices.Equal(words, want) {
		t.Fatalf("merged %q, want %q", words, want)
	}
	if !slices.Equal(al[1].tokens, []int32{1, 2, 3}) {
		t.Fatalf("merged tokens %v, want [1 2 3]", al[1].tokens)
	}
}

// TestRound2AndFloat16Mean: numpy's round (rint(x·100)/100) and np.mean of
// float16 values rounded back to float16.
func TestRound2AndFloat16Mean(t *testing.T) {
	if got := round2(0.125); got != 0.12 {
		t.Errorf("round2(0.125) = %v, want 0.12 (half to even)", got)
	}
	if got := round2(7.4199999999); got != 7.42 {
		t.Errorf("round2(7.4199999999) = %v", got)
	}
	// 0.1 is not a float16: its nearest is 0.0999755859375.
	if got := float16Mean([]float32{0.1}); got != 0.0999755859375 {
		t.Errorf("float16Mean([0.1]) = %v, want 0.0999755859375", got)
	}
	if got := float16Mean([]float32{0.5, 1}); got != 0.75 {
		t.Errorf("float16Mean([0.5 1]) = %v", got)
	}
}

// TestSubtitlesFromWords: with word timestamps, srt/vtt cues are the
// segments that have words, from the first word's start to the last's end.
func TestSubtitlesFromWords(t *testing.T) {
	r := &Result{Segments: []Segment{
		{Start: 0, End: 2, Text: " a b", Words: []Word{{Word: " a", Start: 0.1, End: 0.5}, {Word: " b", Start: 0.5, End: 1.9}}},
		{Start: 2, End: 3, Text: "", Words: []Word{}},
	}}
	got := subtitles(r)
	if len(got) != 1 || got[0] != (subtitle{0.1, 1.9, "a b"}) {
		t.Fatalf("subtitles %+v", got)
	}
	r.Segments[0].Words, r.Segments[1].Words = nil, nil
	if got := subtitles(r); len(got) != 2 || got[0] != (subtitle{0, 2, "a b"}) {
		t.Fatalf("segment subtitles %+v", got)
	}
}
