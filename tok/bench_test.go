package tok

import (
	"testing"
)

// BenchmarkEncodeCorpus encodes the parity corpus one document at a time
// (the workload bench_tok.py gives Hugging Face tokenizers); MB/s is input
// bytes per second. The word cache is warm after the first iteration, as it
// is for tokenizers' own cache.
func BenchmarkEncodeCorpus(b *testing.B) {
	docs := corpus(b)
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	for _, tc := range parityCases() {
		b.Run(tc.name, func(b *testing.B) {
			tk, _ := tc.load(b)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for b.Loop() {
				for _, d := range docs {
					if _, err := tk.Encode(d, true); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
