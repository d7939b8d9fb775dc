package whisper

import (
	"math"
	"slices"
	"sort"
	"unsafe"
)

// beamSearch is openai-whisper's BeamSearchDecoder for one audio: each step
// extends every beam by its beam_size+1 most probable tokens, ranks the
// candidates by cumulative log-probability (float32, as its tensors hold
// them) and keeps the best beam_size that do not end in <|endoftext|>;
// those that end in it before that rank are finished, up to
// round(beam_size·patience) of them, and the search is complete when that
// many have finished. mlx-whisper 0.4.3 declares beam_size but raises
// NotImplementedError for it; faster-whisper (CTranslate2) ranks the same
// way with a different candidate bookkeeping (README, transcribe).
type beamSearch struct {
	size, maxCandidates int
	eot                 int32
	finished            [][]int32 // in the order they were added
	finishedScores      []float32
}

func newBeamSearch(size int, patience float64, eot int32) *beamSearch {
	if patience <= 0 {
		patience = 1
	}
	// Python's round(): halves to even.
	return &beamSearch{size: size, maxCandidates: int(math.RoundToEven(float64(size) * patience)), eot: eot}
}

// update is BeamSearchDecoder.update: rows are the beams' tokens, sums their
// cumulative log-probabilities, logprobs the filtered log-softmax [rows,
// vocab]. It returns the next beams, their sums, the row each came from
// (for the key-value cache) and whether the search is complete.
func (b *beamSearch) update(rows [][]int32, sums, logprobs []float32, vocab int) ([][]int32, []float32, []int32, bool) {
	type cand struct {
		seq   []int32
		score float32
		src   int32
	}
	var cands []cand
	seen := map[string]int{} // scores[sequence]: a repeated sequence keeps its place, takes the later score and source
	for j, prefix := range rows {
		lp := logprobs[j*vocab : (j+1)*vocab]
		for _, tok := range topK(lp, b.size+1) {
			seq := append(slices.Clip(prefix), tok)
			c := cand{seq: seq, score: sums[j] + lp[tok], src: int32(j)}
			key := seqKey(seq)
			if i, ok := seen[key]; ok {
				cands[i].score, cands[i].src = c.score, c.src
				continue
			}
			seen[key] = len(cands)
			cands = append(cands, c)
		}
	}
	// sorted(scores, key=scores.get, reverse=True): stable, best first.
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	next := make([][]int32, 0, b.size)
	nextSums := make([]float32, 0, b.size)
	sources := make([]int32, 0, b.size)
	var newly []cand
	for _, c := range cands {
		if c.seq[len(c.seq)-1] == b.eot {
			newly = append(newly, c)
			continue
		}
		next = append(next, c.seq)
		nextSums = append(nextSums, c.score)
		sources = append(sources, c.src)
		if len(next) == b.size {
			break
		}
	}
	// newly is in descending score order already.
	for _, c := range newly {
		if len(b.finished) >= b.maxCandidates {
			break
		}
		b.finished = append(b.finished, c.seq)
		b.finishedScores = append(b.finishedScores, c.score)
	}
	return next, nextSums, sources, len(b.finished) >= b.maxCandidates
}

// finalize is BeamSearchDecoder.finalize: the finished sequences, topped up
// to beam_size with the unfinished beams (best sum first, <|endoftext|>
// appended) when fewer have finished.
func (b *beamSearch) finalize(rows [][]int32, sums []float32) ([][]int32, []float32) {
	cands, scores := slices.Clone(b.finished), slices.Clone(b.finishedScores)
	if len(cands) < b.size {
		// list(np.argsort(sum_logprobs))[::-1]: ascending (numpy's sort of
		// a few values is an insertion sort, so stable), then reversed.
		order := make([]int, len(sums))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(i, j int) bool { return sums[order[i]] < sums[order[j]] })
		for i := len(order) - 1; i >= 0; i-- {
			j := order[i]
			cands = append(cands, append(slices.Clone(rows[j]), b.eot))
			scores = append(scores, sums[j])
			if len(cands) >= b.size {
				break
			}
		}
	}
	return cands, scores
}

// topK returns the indices of the k largest values, largest first (equal
// values: the lower index first).
func topK(v []float32, k int) []int32 {
	k = min(k, len(v))
	top := make([]int32, 0, k+1)
	for i, x := range v {
		if len(top) == k && !(x > v[top[k-1]]) {
			continue
		}
		p := sort.Search(len(top), func(j int) bool { return x > v[top[j]] })
		top = slices.Insert(top, p, int32(i))
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}

func seqKey(seq []int32) string {
	return string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(seq))), 4*len(seq)))
}

// rankCandidates is MaximumLikelihoodRanker.rank: the candidate with the
// highest sum_logprob / penalty, penalty the length (alpha nil) or
// ((5 + length) / 6)^alpha; the first of equals.
func rankCandidates(cands [][]int32, scores []float32, alpha *float64) int {
	best, bestScore := 0, math.Inf(-1)
	for i, c := range cands {
		penalty := float64(len(c))
		if alpha != nil {
			penalty = math.Pow((5+float64(len(c)))/6, *alpha)
		}
		s := float64(scores[i]) / penalty
		if i == 0 || s > bestScore || math.IsNaN(s) && !math.IsNaN(bestScore) {
			best, bestScore = i, s
		}
	}
	return best
}
