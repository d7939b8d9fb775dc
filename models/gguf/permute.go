package gguf

import "fmt"

// UnpermuteRopeRows undoes the row permutation llama.cpp's converter applies
// to llama-family attn_q / attn_k weights (so that ggml's rope can rotate
// adjacent pairs): within each of nHead heads of d rows, HF row j*d/2 + i was
// stored at row 2i + j. Pass the attention head count for attn_q and the KV
// head count for attn_k. It moves whole rows, so it is lossless for
// quantized tensors too (the packed weights, scales and biases of a row move
// together). The result is a copy; t (which may point into the read-only
// mapping) is not modified.
func (t *Tensor) UnpermuteRopeRows(nHead int) (*Tensor, error) {
	if len(t.Shape) == 0 || nHead <= 0 || t.Shape[0]%(2*nHead) != 0 {
		return nil, fmt.Errorf("cannot unpermute tensor %s of shape %v for %d heads: rows must split into heads of even size", t.Name, t.Shape, nHead)
	}
	rows := t.Shape[0]
	out := *t
	if t.Quant == nil {
		out.Data = permuteRows(t.Data, rows, nHead)
		return &out, nil
	}
	q := *t.Quant
	q.Weight = permuteRows(q.Weight, rows, nHead)
	q.Scales = permuteRows(q.Scales, rows, nHead)
	q.Biases = permuteRows(q.Biases, rows, nHead)
	out.Quant = &q
	return &out, nil
}

// permuteRows copies b (rows rows of equal size) so that, per head of d
// rows, output row j*d/2 + i is input row 2i + j.
func permuteRows(b []byte, rows, nHead int) []byte {
	out := make([]byte, len(b))
	rowBytes := len(b) / rows
	d := rows / nHead
	for h := 0; h < nHead; h++ {
		for i := 0; i < d/2; i++ {
			for j := 0; j < 2; j++ {
				src := (h*d + 2*i + j) * rowBytes
				dst := (h*d + j*d/2 + i) * rowBytes
				copy(out[dst:dst+rowBytes], b[src:src+rowBytes])
			}
		}
	}
	return out
}
