package whisper

import (
	"math"
	"slices"
	"testing"
)

func TestTopK(t *testing.T) {
	v := []float32{0.5, 2, -1, 2, float32(math.Inf(-1)), 1}
	if got := topK(v, 3); !slices.Equal(got, []int32{1, 3, 5}) {
		t.Errorf("topK 3 = %v, want [1 3 5] (equal values: lower index first)", got)
	}
	if got := topK(v, 10); !slices.Equal(got, []int32{1, 3, 5, 0, 2, 4}) {
		t.Errorf("topK past the length = %v, want all six by value", got)
	}
}

// TestBeamSearchUpdate follows BeamSearchDecoder.update by hand on two beams
// over a vocabulary of five (4 is <|endoftext|>); the values are exact in
// float32.
func TestBeamSearchUpdate(t *testing.T) {
	const eot = 4
	lp := []float32{
		-0.25, -2.5, -3, -4, -0.5, // beam [1]: top 3 are 0, eot, 1
		-0.25, -3, -1, -5, -0.5, // beam [2]: top 3 are 0, eot, 2
	}
	b := newBeamSearch(2, 1, eot)
	next, sums, src, done := b.update([][]int32{{1}, {2}}, []float32{-1, -2}, lp, 5)
	// Ranked: [1 0] -1.25, [1 eot] -1.5, [2 0] -2.25 (the second beam: stop),
	// [2 eot] -2.5 not reached, so not finished.
	if !slices.EqualFunc(next, [][]int32{{1, 0}, {2, 0}}, slices.Equal) || !slices.Equal(sums, []float32{-1.25, -2.25}) || !slices.Equal(src, []int32{0, 1}) {
		t.Errorf("beams %v sums %v sources %v, want [[1 0] [2 0]] [-1.25 -2.25] [0 1]", next, sums, src)
	}
	if done || len(b.finished) != 1 || !slices.Equal(b.finished[0], []int32{1, eot}) || b.finishedScores[0] != -1.5 {
		t.Errorf("finished %v %v done %v, want [[1 4]] [-1.5] and not done (2 needed)", b.finished, b.finishedScores, done)
	}
	// Patience 0.5: round(2·0.5) = 1 finished sequence completes the search.
	b = newBeamSearch(2, 0.5, eot)
	if _, _, _, done := b.update([][]int32{{1}, {2}}, []float32{-1, -2}, lp, 5); !done {
		t.Error("patience 0.5: not done after one finished sequence")
	}
	// Identical beams (the first step): one candidate per sequence, the
	// later beam its source (Python's dict keeps the first place, the last value).
	b = newBeamSearch(2, 1, eot)
	same := append(slices.Clone(lp[:5]), lp[:5]...)
	next, _, src, _ = b.update([][]int32{{1}, {1}}, []float32{0, 0}, same, 5)
	if !slices.EqualFunc(next, [][]int32{{1, 0}, {1, 1}}, slices.Equal) || !slices.Equal(src, []int32{1, 1}) {
		t.Errorf("identical beams: %v from %v, want [[1 0] [1 1]] from [1 1]", next, src)
	}
	// finalize tops the one finished sequence up with the best unfinished beam.
	cands, scores := b.finalize([][]int32{{1, 1}, {1, 0}}, []float32{-3, -0.5})
	if !slices.EqualFunc(cands, [][]int32{{1, eot}, {1, 0, eot}}, slices.Equal) || !slices.Equal(scores, []float32{-0.5, -0.5}) {
		t.Errorf("finalize: %v %v, want [[1 4] [1 0 4]] [-0.5 -0.5]", cands, scores)
	}
}

// TestRankCandidates: MaximumLikelihoodRanker with length normalisation
// (nil) and with Google NMT's penalty.
func TestRankCandidates(t *testing.T) {
	cands := [][]int32{{1}, {1, 2, 3, 4}}
	scores := []float32{-1, -3}
	// -1/1 against -3/4: the longer one.
	if got := rankCandidates(cands, scores, nil); got != 1 {
		t.Errorf("length normalised: %d, want 1", got)
	}
	// alpha 0: the penalty is 1, the sums alone rank.
	zero := 0.0
	if got := rankCandidates(cands, scores, &zero); got != 0 {
		t.Errorf("alpha 0: %d, want 0", got)
	}
	// alpha 1: -1/1 against -3/1.5: the first.
	one := 1.0
	if got := rankCandidates(cands, scores, &one); got != 0 {
		t.Errorf("alpha 1: %d, want 0", got)
	}
	// Equal scores: the first.
	if got := rankCandidates([][]int32{{1, 2}, {3}}, []float32{-2, -1}, nil); got != 0 {
		t.Errorf("equal scores: %d, want 0", got)
	}
}
