package whisper

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// Word is one word of a segment with its times (mlx-whisper's word dict).
type Word struct {
	Word        string  `json:"word"`
	Start       float64 `json:"start"`
	End         float64 `json:"end"`
	Probability float64 `json:"probability"`
}

// wordTiming is timing.py's WordTiming.
type wordTiming struct {
	word        string
	tokens      []int32
	start, end  float64
	probability float64
}

// Punctuation merged into the next and previous word (mlx-whisper's
// transcribe() defaults).
const (
	prependPunctuations = "\"'“¿([{-"
	appendPunctuations  = "\"'.。,，!！?？:：”)]}、"
	pyPunctuation       = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" // Python's string.punctuation
)

// alignmentHeads are the (layer, head) pairs whose cross-attention
// find_alignment reads: the model's own (CTranslate2 config.json's
// alignment_heads) or mlx-whisper's default, every head of the last half of
// the decoder layers.
func (m *Model) alignmentHeads() [][2]int {
	if len(m.AlignmentHeads) > 0 {
		return m.AlignmentHeads
	}
	var out [][2]int
	for l := m.Dims.NTextLayer / 2; l < m.Dims.NTextLayer; l++ {
		for h := range m.Dims.NTextHead {
			out = append(out, [2]int{l, h})
		}
	}
	return out
}

// findAlignment is timing.py's find_alignment (medfilt_width 7, qk_scale 1)
// on one mel window [3000, n_mels] of which numFrames are the clip's.
func (d *Decoder) findAlignment(mel []float32, textTokens []int32, numFrames int) ([]wordTiming, error) {
	if len(textTokens) == 0 {
		return nil, nil
	}
	t := d.Tok
	dims := d.M.Dims
	tokens := append(append(slices.Clone(t.SOTSequence), t.NoTimestamps), textTokens...)
	tokens = append(tokens, t.EOT)
	nSOT := len(t.SOTSequence)
	s := mlx.NewScope()
	defer s.Close()
	x := mlx.AsType(mlx.FromSlice(mel, 1, 2*dims.NAudioCtx, dims.NMels), d.M.Activation)
	audioFeatures := d.M.Encode(x)
	cache := Cache{KeepCrossQK: true}
	defer cache.Free()
	// Decode's logits are the decoder's output cast to float32; find_alignment
	// reads the output itself, in the activation dtype.
	logits := mlx.AsType(d.M.Decode(mlx.FromSlice(tokens, 1, len(tokens)), audioFeatures, &cache), d.M.Activation)
	n := len(tokens)
	sampled := mlx.Slice(logits, []int{0, nSOT, 0}, []int{1, n - 2, int(t.EOT)})
	probs := mlx.Softmax(mlx.Reshape(sampled, n-2-nSOT, int(t.EOT)), []int{-1}, true)
	tp := mlx.TakeAlongAxis(probs, mlx.FromSlice(textTokens, len(textTokens), 1), 1)
	heads := d.M.alignmentHeads()
	var ws []*mlx.Array
	for _, lh := range heads {
		qk := cache.CrossQK[lh[0]]
		ws = append(ws, mlx.Reshape(mlx.Slice(qk, []int{0, lh[1], 0, 0}, []int{1, lh[1] + 1, n, qk.Dim(3)}), n, qk.Dim(3)))
	}
	w := mlx.Slice(mlx.Stack(ws, 0), []int{0, 0, 0}, []int{len(heads), n, numFrames / 2})
	w = mlx.Multiply(w, mlx.Scalar(1, w.Dtype()))
	w = mlx.AsType(mlx.Softmax(w, []int{-1}, true), mlx.Float32)
	mean := mlx.Mean(w, []int{-2}, true)
	std := mlx.Sqrt(mlx.Var(w, []int{-2}, true, 0))
	w = mlx.Divide(mlx.Subtract(w, mean), std)
	wv, err := w.Float32s()
	if err != nil {
		return nil, fmt.Errorf("whisper word alignment: %w", err)
	}
	tpv, err := mlx.AsType(tp, mlx.Float32).Float32s()
	if err != nil {
		return nil, fmt.Errorf("whisper word alignment: %w", err)
	}
	f := numFrames / 2
	medianFilter(wv, len(heads)*n, f, 7)
	// matrix = weights.mean(axis=0) (float32, heads added in order), rows
	// from the <|notimestamps|> one to the last text token, negated for dtw.
	rows := n - 1 - nSOT
	cost := make([]float32, rows*f)
	for i := range rows {
		for j := range f {
			var acc float32
			for h := range heads {
				acc += wv[(h*n+nSOT+i)*f+j]
			}
			cost[i*f+j] = -(acc / float32(len(heads)))
		}
	}
	textIdx, timeIdx := dtw(cost, rows, f)

	words, wordTokens := d.splitToWordTokens(append(slices.Clone(textTokens), t.EOT))
	if len(wordTokens) <= 1 {
		return nil, nil
	}
	bounds := []int{0}
	for _, wt := range wordTokens[:len(wordTokens)-1] {
		bounds = append(bounds, bounds[len(bounds)-1]+len(wt))
	}
	var jumpTimes []float64
	for k := range textIdx {
		if k == 0 || textIdx[k] != textIdx[k-1] {
			jumpTimes = append(jumpTimes, float64(timeIdx[k])/(audio.SampleRate/audio.HopLength/2))
		}
	}
	out := make([]wordTiming, 0, len(bounds)-1)
	for k := 0; k+1 < len(bounds) && k < len(words); k++ {
		i, j := bounds[k], bounds[k+1]
		out = append(out, wordTiming{word: words[k], tokens: wordTokens[k], start: jumpTimes[i], end: jumpTimes[j],
			probability: float16Mean(tpv[i:j])})
	}
	return out, nil
}

// float16Mean is np.mean of float16 values: a float32 sum (numpy's
// pairwise_sum), divided in float32, rounded to float16.
func float16Mean(v []float32) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	// add.reduce starts from the first value and adds the pairwise sum of the rest.
	m := (v[0] + pairwiseSum(v[1:])) / float32(len(v))
	return float64(mlxRoundF16(m))
}

// pairwiseSum is numpy's pairwise_sum for a contiguous float32 run.
func pairwiseSum(a []float32) float32 {
	n := len(a)
	switch {
	case n < 8:
		res := float32(math.Copysign(0, -1))
		for _, x := range a {
			res += x
		}
		return res
	case n <= 128:
		var r [8]float32
		copy(r[:], a[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			for k := range 8 {
				r[k] += a[i+k]
			}
		}
		res := (r[0] + r[1]) + (r[2] + r[3]) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += a[i]
		}
		return res
	default:
		n2 := n / 2
		n2 -= n2 % 8
		return pairwiseSum(a[:n2]) + pairwiseSum(a[n2:])
	}
}

// mlxRoundF16 rounds a float32 to the nearest float16 (ties to even) and
// returns it as a float32.
func mlxRoundF16(f float32) float32 {
	if f == 0 || math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return f
	}
	b := math.Float32bits(f)
	sign := b & 0x80000000
	a := math.Float32frombits(b &^ 0x80000000)
	var r float32
	switch {
	case a >= 65520:
		r = float32(math.Inf(1))
	case a < 6.103515625e-05: // subnormal float16: a multiple of 2^-24
		q := float64(a) * (1 << 24)
		r = float32(math.RoundToEven(q) / (1 << 24))
	default:
		// keep 10 mantissa bits, ties to even
		u := math.Float32bits(a)
		lsb := (u >> 13) & 1
		u += 0xfff + lsb
		u &^= 0x1fff
		r = math.Float32frombits(u)
	}
	return math.Float32frombits(math.Float32bits(r) | sign)
}

// medianFilter is timing.py's median_filter along the last axis of rows ×
// cols: reflect padding of width/2, then scipy.signal.medfilt's median of
// each window (the windows reaching medfilt's zero padding are cut off).
func medianFilter(x []float32, rows, cols, width int) {
	pad := width / 2
	if cols <= pad {
		return
	}
	ext := make([]float32, cols+2*pad)
	win := make([]float32, width)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		for i := range ext {
			k := i - pad
			if k < 0 {
				k = -k
			} else if k >= cols {
				k = 2*(cols-1) - k
			}
			ext[i] = row[k]
		}
		for i := range cols {
			copy(win, ext[i:i+width])
			slices.Sort(win)
			row[i] = win[pad]
		}
	}
}

// dtw is timing.py's dtw_cpu and backtrace on x [n, m] (float32 costs, ties
// to the left move), returning the text and time indices of the path.
func dtw(x []float32, n, m int) (textIdx, timeIdx []int) {
	inf := float32(math.Inf(1))
	cost := make([]float32, (n+1)*(m+1))
	trace := make([]int8, (n+1)*(m+1))
	for i := range cost {
		cost[i], trace[i] = inf, -1
	}
	cost[0] = 0
	w := m + 1
	for j := 1; j <= m; j++ {
		for i := 1; i <= n; i++ {
			c0, c1, c2 := cost[(i-1)*w+j-1], cost[(i-1)*w+j], cost[i*w+j-1]
			var c float32
			var t int8
			switch {
			case c0 < c1 && c0 < c2:
				c, t = c0, 0
			case c1 < c0 && c1 < c2:
				c, t = c1, 1
			default:
				c, t = c2, 2
			}
			cost[i*w+j] = x[(i-1)*m+j-1] + c
			trace[i*w+j] = t
		}
	}
	for j := range w {
		trace[j] = 2
	}
	for i := range n + 1 {
		trace[i*w] = 1
	}
	i, j := n, m
	var path [][2]int
	for i > 0 || j > 0 {
		path = append(path, [2]int{i - 1, j - 1})
		switch trace[i*w+j] {
		case 0:
			i, j = i-1, j-1
		case 1:
			i--
		default:
			j--
		}
	}
	slices.Reverse(path)
	for _, p := range path {
		textIdx, timeIdx = append(textIdx, p[0]), append(timeIdx, p[1])
	}
	return textIdx, timeIdx
}

// decodeRaw is the tokenizer's decode_with_timestamps for text
// and special tokens (no timestamps here), invalid UTF-8 replaced by U+FFFD.
func (t *Tokenizer) decodeRaw(ids []int32) string {
	return strings.ToValidUTF8(t.bpe.Decode(ids, false), "\uFFFD")
}

// splitToWordTokens is the tokenizer's split_to_word_tokens: on unicode
// boundaries for zh, ja, th, lo, my and yue, else on spaces.
func (d *Decoder) splitToWordTokens(tokens []int32) ([]string, [][]int32) {
	t := d.Tok
	subwords, subTokens := t.splitOnUnicode(tokens)
	switch t.Language {
	case "zh", "ja", "th", "lo", "my", "yue":
		return subwords, subTokens
	}
	var words []string
	var wordTokens [][]int32
	for k, sw := range subwords {
		special := subTokens[k][0] >= t.EOT
		withSpace := strings.HasPrefix(sw, " ")
		punct := strings.Contains(pyPunctuation, trimSpace(sw))
		if special || withSpace || punct || len(words) == 0 {
			words = append(words, sw)
			wordTokens = append(wordTokens, slices.Clone(subTokens[k]))
		} else {
			words[len(words)-1] += sw
			wordTokens[len(wordTokens)-1] = append(wordTokens[len(wordTokens)-1], subTokens[k]...)
		}
	}
	return words, wordTokens
}

// splitOnUnicode is split_tokens_on_unicode: a word ends where its tokens
// decode to whole characters.
func (t *Tokenizer) splitOnUnicode(tokens []int32) ([]string, [][]int32) {
	full := []rune(t.decodeRaw(tokens))
	var words []string
	var wordTokens [][]int32
	var cur []int32
	offset := 0
	for _, id := range tokens {
		cur = append(cur, id)
		dec := t.decodeRaw(cur)
		rs := []rune(dec)
		k := slices.Index(rs, utf8.RuneError)
		if k < 0 || offset+k < len(full) && full[offset+k] == utf8.RuneError {
			words = append(words, dec)
			wordTokens = append(wordTokens, cur)
			cur = nil
			offset += len(rs)
		}
	}
	return words, wordTokens
}

// mergePunctuations is timing.py's merge_punctuations.
func mergePunctuations(al []wordTiming) {
	i, j := len(al)-2, len(al)-1
	for i >= 0 {
		p, f := &al[i], &al[j]
		if strings.HasPrefix(p.word, " ") && strings.Contains(prependPunctuations, trimSpace(p.word)) {
			f.word = p.word + f.word
			f.tokens = append(slices.Clone(p.tokens), f.tokens...)
			p.word, p.tokens = "", nil
		} else {
			j = i
		}
		i--
	}
	i, j = 0, 1
	for j < len(al) {
		p, f := &al[i], &al[j]
		if !strings.HasSuffix(p.word, " ") && strings.Contains(appendPunctuations, f.word) {
			p.word += f.word
			p.tokens = append(slices.Clone(p.tokens), f.tokens...)
			f.word, f.tokens = "", nil
		} else {
			i = j
		}
		j++
	}
}

// round2 is round(x, 2) on a numpy float64 (the word times are): numpy's
// round, rint(x·100)/100, not Python's correctly rounded one.
func round2(x float64) float64 {
	return math.RoundToEven(x*100) / 100
}

// addWordTimestamps is timing.py's add_word_timestamps on one window's
// segments (mel the window, numFrames its clip frames); it returns the
// updated last speech timestamp's input for the caller to keep.
func (d *Decoder) addWordTimestamps(segs []Segment, mel []float32, numFrames int, lastSpeech float64) error {
	if len(segs) == 0 {
		return nil
	}
	t := d.Tok
	perSeg := make([][]int32, len(segs))
	var text []int32
	for k, s := range segs {
		for _, id := range s.Tokens {
			if id < t.EOT {
				perSeg[k] = append(perSeg[k], id)
			}
		}
		text = append(text, perSeg[k]...)
	}
	al, err := d.findAlignment(mel, text, numFrames)
	if err != nil {
		return err
	}
	var durs []float64
	for _, w := range al {
		if dd := w.end - w.start; dd != 0 {
			durs = append(durs, dd)
		}
	}
	median := 0.0
	if len(durs) > 0 {
		sorted := slices.Clone(durs)
		slices.Sort(sorted)
		if h := len(sorted) / 2; len(sorted)%2 == 1 {
			median = sorted[h]
		} else {
			median = (sorted[h-1] + sorted[h]) / 2
		}
	}
	median = min(0.7, median)
	maxDur := median * 2
	if len(durs) > 0 {
		const ends = ".。!！?？"
		for i := 1; i < len(al); i++ {
			if al[i].end-al[i].start > maxDur {
				// Python's `word in marks`: a substring test ("" is in it).
				if strings.Contains(ends, al[i].word) {
					al[i].end = al[i].start + maxDur
				} else if strings.Contains(ends, al[i-1].word) {
					al[i].start = al[i].end - maxDur
				}
			}
		}
	}
	mergePunctuations(al)
	timeOffset := float64(segs[0].Seek*audio.HopLength) / audio.SampleRate
	wi := 0
	for k := range segs {
		seg := &segs[k]
		saved := 0
		words := []Word{}
		for wi < len(al) && saved < len(perSeg[k]) {
			tm := al[wi]
			if tm.word != "" {
				words = append(words, Word{Word: tm.word, Start: round2(timeOffset + tm.start), End: round2(timeOffset + tm.end), Probability: tm.probability})
			}
			saved += len(tm.tokens)
			wi++
		}
		if len(words) > 0 {
			if words[0].End-lastSpeech > median*4 && (words[0].End-words[0].Start > maxDur ||
				len(words) > 1 && words[1].End-words[0].Start > maxDur*2) {
				if len(words) > 1 && words[1].End-words[1].Start > maxDur {
					b := max(words[1].End/2, words[1].End-maxDur)
					words[0].End, words[1].Start = b, b
				}
				words[0].Start = max(0, words[0].End-maxDur)
			}
			if seg.Start < words[0].End && seg.Start-0.5 > words[0].Start {
				words[0].Start = max(0, min(words[0].End-median, seg.Start))
			} else {
				seg.Start = words[0].Start
			}
			last := &words[len(words)-1]
			if seg.End > last.Start && seg.End+0.5 < last.End {
				last.End = max(last.Start+median, seg.End)
			} else {
				seg.End = last.End
			}
			lastSpeech = seg.End
		}
		seg.Words = words
	}
	return nil
}
