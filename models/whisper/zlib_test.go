package whisper

import (
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// zlibCases are texts like Whisper's (words, repeats, hallucinated loops,
// punctuation, non-ASCII) and a few odd ones.
func zlibCases() []string {
	r := rand.New(rand.NewPCG(7, 11))
	words := strings.Fields("the a to and of you I it that is in we so my fellow Americans ask not what your country can do for " +
		"John Dashwood had then leisure consider how much there might be prudently his power them. Thank you! , ? " +
		"ça été über naïve 日本語 ♪ -- okay yeah um uh")
	cases := []string{"a", "aa", "aaa", "abcabcabc", strings.Repeat("la ", 100), strings.Repeat("Thank you. ", 40),
		" And so my fellow Americans ask not what your country can do for you ask what you can do for your country"}
	for i := 0; i < 3000; i++ {
		n := 1 + r.IntN(120)
		var b strings.Builder
		for j := 0; j < n; j++ {
			if j > 0 && r.IntN(5) == 0 {
				b.WriteString(" ")
			}
			b.WriteString(" " + words[r.IntN(len(words))])
		}
		s := b.String()
		if i%7 == 0 { // a loop, as a stuck decoder writes
			s = strings.Repeat(s[:min(len(s), 1+r.IntN(30))], 1+r.IntN(60))
		}
		cases = append(cases, s)
	}
	big := make([]byte, 9000)
	for i := range big {
		big[i] = byte(r.IntN(256))
	}
	return append(cases, string(big))
}

// TestZlibLenMatchesPython: zlibLen is len(zlib.compress(text)) as CPython's
// zlib computes it, on every case.
func TestZlibLenMatchesPython(t *testing.T) {
	py := testenv.Python(t)
	cases := zlibCases()
	in := filepath.Join(t.TempDir(), "cases.json")
	hexes := make([]string, len(cases))
	for i, c := range cases {
		hexes[i] = hex.EncodeToString([]byte(c)) // the bytes as they are, valid UTF-8 or not
	}
	b, _ := json.Marshal(hexes)
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", `import json, sys, zlib
print(json.dumps([len(zlib.compress(bytes.fromhex(s))) for s in json.load(open(sys.argv[1]))]))`, in).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, s := range cases {
		if got := zlibLen([]byte(s)); got != want[i] {
			bad++
			if bad <= 5 {
				t.Errorf("case %d (%d bytes, %.40q): %d bytes, zlib %d", i, len(s), s, got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d lengths differ from zlib's", bad, len(cases))
	}
}
