package tok

import (
	"strings"
	"testing"
)

// TestDetokenizerCorpus streams every 5th corpus document through each real
// tokenizer and requires the pieces to concatenate to Decode(all ids), with
// no piece ending in an incomplete character.
func TestDetokenizerCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("uses the parity corpus")
	}
	docs := corpus(t)
	for _, tc := range parityCases() {
		t.Run(tc.name, func(t *testing.T) {
			tk, _ := tc.load(t)
			for i := 0; i < len(docs); i += 5 {
				ids, err := tk.Encode(docs[i], true)
				if err != nil {
					t.Fatal(err)
				}
				for _, skip := range []bool{false, true} {
					d := tk.NewDetokenizer(skip)
					var b strings.Builder
					for _, id := range ids {
						piece := d.Next(id)
						if strings.HasSuffix(piece, "\uFFFD") && !strings.HasSuffix(tk.Decode(ids, skip), "\uFFFD") && !strings.Contains(docs[i], "\uFFFD") {
							t.Errorf("doc %d: piece %q ends in an incomplete character", i, piece)
						}
						b.WriteString(piece)
					}
					b.WriteString(d.Flush())
					if want := tk.Decode(ids, skip); b.String() != want {
						t.Fatalf("doc %d skip=%v: streamed %q, want %q", i, skip, b.String(), want)
					}
				}
			}
		})
	}
}

// TestDetokenizerHoldsPartialUTF8 checks that a character split over
// byte-level tokens is emitted only once complete.
func TestDetokenizerHoldsPartialUTF8(t *testing.T) {
	tk := tinyByteLevel(t)
	cases := []struct {
		name string
		text string
	}{
		{"ascii", "hello"},
		{"two-byte", "é"},
		{"emoji", "👩‍💻!"},
		{"cjk", "日本"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := tk.Encode(tc.text, false)
			if err != nil {
				t.Fatal(err)
			}
			d := tk.NewDetokenizer(false)
			var got []string
			for _, id := range ids {
				if p := d.Next(id); p != "" {
					got = append(got, p)
				}
			}
			got = append(got, d.Flush())
			if strings.Join(got, "") != tc.text {
				t.Fatalf("streamed %q, want %q", got, tc.text)
			}
			for _, p := range got {
				if strings.ContainsRune(p, '\uFFFD') {
					t.Fatalf("piece %q holds a replacement character", p)
				}
			}
		})
	}
}
