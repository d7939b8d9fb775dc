package whisper

import (
	"bytes"
	"compress/zlib"
)

// zlibLen is the length of zlib.compress(b) as Python's zlib module (the
// zlib library, level 6, 15 window bits, memLevel 8) writes it, which is
// what mlx-whisper's compression_ratio divides by. Go's compress/zlib makes
// other (longer) streams, and the ratio decides temperature fallback, so
// the length is computed here from zlib's algorithm as RFC 1951 and zlib's
// documented parameters describe it: lazy LZ77 matching (hash chains of
// 3-byte prefixes, good 8, lazy 16, nice 128, chain 128, length-3 matches
// farther than 4096 dropped), then one block, the shortest of stored, fixed
// and dynamic Huffman codes, the trees built as zlib builds them.
// Inputs longer than one of zlib's blocks fall back to Go's compressor.
func zlibLen(b []byte) int {
	const maxSimple = 16000 // below zlib's 16383-symbol block and 32506-byte match window
	if len(b) == 0 || len(b) > maxSimple {
		var z bytes.Buffer
		w, _ := zlib.NewWriterLevel(&z, 6)
		w.Write(b)
		w.Close()
		return z.Len()
	}
	var lit [lCodes]int
	var dist [dCodes]int
	lz77(b, func(c byte) { lit[c]++ }, func(d, l int) {
		lit[lengthCode(l)+257]++
		dist[distCode(d)]++
	})
	lit[256] = 1 // END_BLOCK
	return 2 + blockBytes(lit[:], dist[:], len(b)) + 4
}

const (
	lCodes    = 286
	dCodes    = 30
	blCodes   = 19
	minMatch  = 3
	maxMatch  = 258
	tooFar    = 4096
	hashBits  = 15
	hashShift = 5
)

// lz77 runs zlib's deflate_slow over b (one window, Z_FINISH), reporting
// literals and (distance, length) matches.
func lz77(b []byte, literal func(byte), match func(dist, length int)) {
	const goodMatch, maxLazy, niceMatch, maxChain = 8, 16, 128, 128
	n := len(b)
	win := make([]byte, n+2*maxMatch) // zlib zeroes the bytes past the data
	copy(win, b)
	hashMask := 1<<hashBits - 1
	head := make([]int, 1<<hashBits)
	prev := make([]int, n+maxMatch)
	insH := 0
	if n >= minMatch {
		insH = int(win[0])
		insH = (insH<<hashShift ^ int(win[1])) & hashMask
	}
	insert := func(str int) int {
		insH = (insH<<hashShift ^ int(win[str+minMatch-1])) & hashMask
		h := head[insH]
		prev[str] = h
		head[insH] = str
		return h
	}
	strstart, lookahead := 0, n
	matchLength, matchStart := minMatch-1, 0
	prevLength, prevMatch := minMatch-1, 0
	available := false
	longest := func(cur int) int {
		chain := maxChain
		best := prevLength
		nice := niceMatch
		scanEnd1, scanEnd := win[strstart+best-1], win[strstart+best]
		if prevLength >= goodMatch {
			chain >>= 2
		}
		if nice > lookahead {
			nice = lookahead
		}
		for {
			if win[cur+best] == scanEnd && win[cur+best-1] == scanEnd1 && win[cur] == win[strstart] && win[cur+1] == win[strstart+1] {
				l := 2
				for l < maxMatch && win[strstart+l] == win[cur+l] {
					l++
				}
				if l > best {
					matchStart, best = cur, l
					if l >= nice {
						break
					}
					scanEnd1, scanEnd = win[strstart+best-1], win[strstart+best]
				}
			}
			cur = prev[cur]
			chain--
			if cur <= 0 || chain == 0 {
				break
			}
		}
		return min(best, lookahead)
	}
	for lookahead > 0 {
		hashHead := 0
		if lookahead >= minMatch {
			hashHead = insert(strstart)
		}
		prevLength, prevMatch = matchLength, matchStart
		matchLength = minMatch - 1
		if hashHead != 0 && prevLength < maxLazy {
			matchLength = longest(hashHead)
			if matchLength == minMatch && strstart-matchStart > tooFar {
				matchLength = minMatch - 1
			}
		}
		switch {
		case prevLength >= minMatch && matchLength <= prevLength:
			maxInsert := strstart + lookahead - minMatch
			match(strstart-1-prevMatch, prevLength)
			lookahead -= prevLength - 1
			for k := prevLength - 2; k > 0; k-- {
				strstart++
				if strstart <= maxInsert {
					insert(strstart)
				}
			}
			available = false
			matchLength = minMatch - 1
			strstart++
		case available:
			literal(win[strstart-1])
			strstart++
			lookahead--
		default:
			available = true
			strstart++
			lookahead--
		}
	}
	if available {
		literal(win[strstart-1])
	}
}

// RFC 1951's length and distance codes.
var (
	lengthBase  = [29]int{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [29]int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase    = [30]int{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra   = [30]int{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	blExtra     = [blCodes]int{16: 2, 17: 3, 18: 7}
	blOrder     = [blCodes]int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

func lengthCode(l int) int {
	if l == 258 {
		return 28
	}
	c := 0
	for c+1 < 28 && lengthBase[c+1] <= l {
		c++
	}
	return c
}

func distCode(d int) int {
	c := 0
	for c+1 < 30 && distBase[c+1] <= d {
		c++
	}
	return c
}

func staticLitLen(n int) int {
	switch {
	case n < 144:
		return 8
	case n < 256:
		return 9
	case n < 280:
		return 7
	}
	return 8
}

// tree is zlib's build_tree and gen_bitlen for one alphabet: the code
// lengths, and the data cost in bits with them (optLen) and with the static
// codes (staticLen), extra bits included.
type tree struct {
	freq, length []int
	maxCode      int
	optLen       int
	staticLen    int
}

func buildTree(freq []int, extra func(n int) int, static func(n int) int, maxLength int) *tree {
	elems := len(freq)
	t := &tree{freq: make([]int, 2*elems+1), length: make([]int, 2*elems+1)}
	copy(t.freq, freq)
	depth := make([]int, 2*elems+1)
	dad := make([]int, 2*elems+1)
	heapSize := 2*elems + 1
	heap := make([]int, heapSize+1)
	heapLen, heapMax := 0, heapSize
	t.maxCode = -1
	for n := range elems {
		if t.freq[n] != 0 {
			heapLen++
			heap[heapLen] = n
			t.maxCode = n
		}
	}
	for heapLen < 2 {
		node := 0
		if t.maxCode < 2 {
			t.maxCode++
			node = t.maxCode
		}
		heapLen++
		heap[heapLen] = node
		t.freq[node] = 1
		depth[node] = 0
		t.optLen--
		if static != nil {
			t.staticLen -= static(node)
		}
	}
	smaller := func(n, m int) bool {
		return t.freq[n] < t.freq[m] || t.freq[n] == t.freq[m] && depth[n] <= depth[m]
	}
	down := func(k int) {
		v := heap[k]
		j := k << 1
		for j <= heapLen {
			if j < heapLen && smaller(heap[j+1], heap[j]) {
				j++
			}
			if smaller(v, heap[j]) {
				break
			}
			heap[k] = heap[j]
			k = j
			j <<= 1
		}
		heap[k] = v
	}
	for n := heapLen / 2; n >= 1; n-- {
		down(n)
	}
	node := elems
	for {
		n := heap[1]
		heap[1] = heap[heapLen]
		heapLen--
		down(1)
		m := heap[1]
		heapMax--
		heap[heapMax] = n
		heapMax--
		heap[heapMax] = m
		t.freq[node] = t.freq[n] + t.freq[m]
		depth[node] = max(depth[n], depth[m]) + 1
		dad[n], dad[m] = node, node
		heap[1] = node
		node++
		down(1)
		if heapLen < 2 {
			break
		}
	}
	heapMax--
	heap[heapMax] = heap[1]
	// gen_bitlen
	var blCount [16]int
	t.length[heap[heapMax]] = 0
	overflow := 0
	h := heapMax + 1
	for ; h < heapSize; h++ {
		n := heap[h]
		bits := t.length[dad[n]] + 1
		if bits > maxLength {
			bits, overflow = maxLength, overflow+1
		}
		t.length[n] = bits
		if n > t.maxCode {
			continue
		}
		blCount[bits]++
		f := t.freq[n]
		t.optLen += f * (bits + extra(n))
		if static != nil {
			t.staticLen += f * (static(n) + extra(n))
		}
	}
	if overflow == 0 {
		return t
	}
	for overflow > 0 {
		bits := maxLength - 1
		for blCount[bits] == 0 {
			bits--
		}
		blCount[bits]--
		blCount[bits+1] += 2
		blCount[maxLength]--
		overflow -= 2
	}
	h = heapSize
	for bits := maxLength; bits != 0; bits-- {
		n := blCount[bits]
		for n != 0 {
			h--
			m := heap[h]
			if m > t.maxCode {
				continue
			}
			if t.length[m] != bits {
				t.optLen += (bits - t.length[m]) * t.freq[m]
				t.length[m] = bits
			}
			n--
		}
	}
	return t
}

// scanTree is zlib's scan_tree: the code-length codes' frequencies.
func scanTree(lengths []int, maxCode int, bl []int) {
	prevLen, nextLen := -1, lengths[0]
	count, maxCount, minCount := 0, 7, 4
	if nextLen == 0 {
		maxCount, minCount = 138, 3
	}
	for n := 0; n <= maxCode; n++ {
		curLen := nextLen
		nextLen = 0xffff
		if n+1 <= maxCode {
			nextLen = lengths[n+1]
		}
		count++
		if count < maxCount && curLen == nextLen {
			continue
		}
		switch {
		case count < minCount:
			bl[curLen] += count
		case curLen != 0:
			if curLen != prevLen {
				bl[curLen]++
			}
			bl[16]++
		case count <= 10:
			bl[17]++
		default:
			bl[18]++
		}
		count, prevLen = 0, curLen
		switch {
		case nextLen == 0:
			maxCount, minCount = 138, 3
		case curLen == nextLen:
			maxCount, minCount = 6, 3
		default:
			maxCount, minCount = 7, 4
		}
	}
}

// blockBytes is _tr_flush_block's choice for one final block: its length in
// bytes (padded), without the zlib header and trailer.
func blockBytes(lit, dist []int, storedLen int) int {
	lt := buildTree(lit, func(n int) int {
		if n >= 257 {
			return lengthExtra[n-257]
		}
		return 0
	}, staticLitLen, 15)
	dt := buildTree(dist, func(n int) int { return distExtra[n] }, func(int) int { return 5 }, 15)
	var blf [blCodes]int
	scanTree(lt.length, lt.maxCode, blf[:])
	scanTree(dt.length, dt.maxCode, blf[:])
	bt := buildTree(blf[:], func(n int) int { return blExtra[n] }, nil, 7)
	maxBlIndex := blCodes - 1
	for ; maxBlIndex >= 3; maxBlIndex-- {
		if bt.length[blOrder[maxBlIndex]] != 0 {
			break
		}
	}
	optLen := lt.optLen + dt.optLen + bt.optLen + 3*(maxBlIndex+1) + 5 + 5 + 4
	staticLen := lt.staticLen + dt.staticLen
	optLenb := (optLen + 3 + 7) >> 3
	staticLenb := (staticLen + 3 + 7) >> 3
	if staticLenb <= optLenb {
		optLenb = staticLenb
	}
	switch {
	case storedLen+4 <= optLenb:
		return 1 + 4 + storedLen
	case staticLenb == optLenb:
		return (3 + staticLen + 7) / 8
	}
	return (3 + optLen + 7) / 8
}
