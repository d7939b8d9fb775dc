// Package unorm implements the four Unicode normalization forms (NFC, NFD,
// NFKC, NFKD) that tokenizer normalizers apply.
//
// The Go standard library carries no decomposition data and mlxgo keeps its
// dependencies to the standard library, so the data lives in tables.txt,
// generated from Python's unicodedata by tok/testdata/gen_unorm.py. It must
// never allocate more than the output it returns on ASCII input: tokenizers
// call it on every encode.
package unorm

import (
	_ "embed"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

//go:embed tables.txt
var tablesText string

// Form is a Unicode normalization form.
type Form int

// The normalization forms of UAX #15.
const (
	NFC Form = iota
	NFD
	NFKC
	NFKD
)

type cccRange struct {
	lo, hi rune
	ccc    uint8
}

type tables struct {
	version string
	ccc     []cccRange
	canon   map[rune][]rune // full canonical decomposition
	compat  map[rune][]rune // full compatibility decomposition (only where it differs)
	compose map[[2]rune]rune
}

var (
	loadOnce sync.Once
	tab      *tables
)

// Hangul syllables decompose algorithmically (Unicode §3.12).
const (
	sBase  = 0xAC00
	lBase  = 0x1100
	vBase  = 0x1161
	tBase  = 0x11A7
	lCount = 19
	vCount = 21
	tCount = 28
	nCount = vCount * tCount
	sCount = lCount * nCount
)

func load() *tables {
	loadOnce.Do(func() {
		t := &tables{canon: map[rune][]rune{}, compat: map[rune][]rune{}, compose: map[[2]rune]rune{}}
		oneCanon := map[rune][]rune{}
		oneCompat := map[rune][]rune{}
		excluded := map[rune]bool{}
		hex := func(s string) rune { v, _ := strconv.ParseUint(s, 16, 32); return rune(v) }
		for _, line := range strings.Split(tablesText, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "v":
				t.version = f[1]
			case "c":
				lo, hi, _ := strings.Cut(f[1], "-")
				c, _ := strconv.Atoi(f[2])
				t.ccc = append(t.ccc, cccRange{hex(lo), hex(hi), uint8(c)})
			case "d", "k":
				var rs []rune
				for _, s := range f[2:] {
					rs = append(rs, hex(s))
				}
				if f[0] == "d" {
					oneCanon[hex(f[1])] = rs
				} else {
					oneCompat[hex(f[1])] = rs
				}
			case "x":
				excluded[hex(f[1])] = true
			}
		}
		// Decompositions in the data are one level deep; expand them fully once.
		var expand func(r rune, compat bool) []rune
		expand = func(r rune, compat bool) []rune {
			d, ok := oneCanon[r]
			if !ok && compat {
				d, ok = oneCompat[r]
			}
			if !ok {
				if r >= sBase && r < sBase+sCount {
					return hangulDecompose(r, nil)
				}
				return []rune{r}
			}
			var out []rune
			for _, c := range d {
				out = append(out, expand(c, compat)...)
			}
			return out
		}
		for r := range oneCanon {
			t.canon[r] = expand(r, false)
		}
		for r := range oneCompat {
			t.compat[r] = expand(r, true)
		}
		for r := range oneCanon {
			if full := expand(r, true); !equalRunes(full, t.canon[r]) {
				t.compat[r] = full
			}
		}
		for r, d := range oneCanon {
			if len(d) == 2 && !excluded[r] {
				t.compose[[2]rune{d[0], d[1]}] = r
			}
		}
		tab = t
	})
	return tab
}

func equalRunes(a, b []rune) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hangulDecompose(r rune, out []rune) []rune {
	s := r - sBase
	out = append(out, lBase+s/nCount, vBase+(s%nCount)/tCount)
	if t := s % tCount; t != 0 {
		out = append(out, tBase+t)
	}
	return out
}

// Version is the Unicode version of the embedded tables.
func Version() string { return load().version }

// CombiningClass returns the canonical combining class of r.
func CombiningClass(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	rs := load().ccc
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi >= r })
	if i < len(rs) && rs[i].lo <= r {
		return rs[i].ccc
	}
	return 0
}

// String returns s in normalization form f. Invalid UTF-8 bytes become U+FFFD,
// as they would when Rust builds a str.
func (f Form) String(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	return string(f.Runes([]rune(s)))
}

// Runes normalizes a rune slice into a new slice.
func (f Form) Runes(in []rune) []rune {
	t := load()
	compat := f == NFKC || f == NFKD
	out := make([]rune, 0, len(in)+len(in)/4)
	for _, r := range in {
		switch {
		case r >= sBase && r < sBase+sCount:
			out = hangulDecompose(r, out)
		default:
			if compat {
				if d, ok := t.compat[r]; ok {
					out = append(out, d...)
					continue
				}
			}
			if d, ok := t.canon[r]; ok {
				out = append(out, d...)
			} else {
				out = append(out, r)
			}
		}
	}
	reorder(out)
	if f == NFC || f == NFKC {
		out = compose(t, out)
	}
	return out
}

// reorder applies the canonical ordering algorithm: a stable sort of each run
// of non-starters by combining class.
func reorder(rs []rune) {
	for i := 0; i < len(rs); {
		if CombiningClass(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && CombiningClass(rs[j]) != 0 {
			j++
		}
		run := rs[i:j]
		sort.SliceStable(run, func(a, b int) bool { return CombiningClass(run[a]) < CombiningClass(run[b]) })
		i = j
	}
}

// compose applies the canonical composition algorithm to a decomposed,
// canonically ordered sequence, in place.
func compose(t *tables, rs []rune) []rune {
	if len(rs) == 0 {
		return rs
	}
	starter := -1
	var lastCCC int = -1
	out := rs[:0]
	for _, r := range rs {
		ccc := int(CombiningClass(r))
		if starter >= 0 {
			s := out[starter]
			blocked := lastCCC != -1 && (lastCCC >= ccc || lastCCC == 0)
			if !blocked {
				if c, ok := composePair(t, s, r); ok {
					out[starter] = c
					continue
				}
			}
		}
		if ccc == 0 {
			starter = len(out)
			lastCCC = -1
		} else {
			lastCCC = ccc
		}
		out = append(out, r)
		if ccc == 0 {
			// A starter directly after the starter blocks nothing yet, but it
			// does end the previous starter's chance to compose.
			lastCCC = -1
		}
	}
	return out
}

func composePair(t *tables, a, b rune) (rune, bool) {
	// Hangul LV and LVT syllables.
	if a >= lBase && a < lBase+lCount && b >= vBase && b < vBase+vCount {
		return sBase + ((a-lBase)*vCount+(b-vBase))*tCount, true
	}
	if a >= sBase && a < sBase+sCount && (a-sBase)%tCount == 0 && b > tBase && b < tBase+tCount {
		return a + (b - tBase), true
	}
	c, ok := t.compose[[2]rune{a, b}]
	return c, ok
}
