package gguf

import (
	"bytes"
	"strings"
	"testing"
)

// ropePermute is llama.cpp's converter permutation, written from its
// definition: reshape rows to (heads, 2, d/2), swap the last two axes.
func ropePermute(hf []byte, rows, nHead int) []byte {
	out := make([]byte, 0, len(hf))
	rb := len(hf) / rows
	d := rows / nHead
	for h := 0; h < nHead; h++ {
		for i := 0; i < d/2; i++ { // axis of size d/2 now comes first
			for j := 0; j < 2; j++ {
				r := h*d + j*(d/2) + i
				out = append(out, hf[r*rb:(r+1)*rb]...)
			}
		}
	}
	return out
}

func TestUnpermuteRopeRows(t *testing.T) {
	cases := []struct {
		name        string
		rows, heads int
	}{
		{"one head", 8, 1},
		{"three heads", 12, 3},
		{"kv heads", 24, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hf := make([]byte, tc.rows*3)
			for i := range hf {
				hf[i] = byte(i)
			}
			stored := ropePermute(hf, tc.rows, tc.heads)
			dense := &Tensor{Name: "attn_q", Shape: []int{tc.rows, 3}, DType: Int8, Data: stored}
			got, err := dense.UnpermuteRopeRows(tc.heads)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Data, hf) {
				t.Errorf("dense rows not restored: %v", got.Data)
			}
			if !bytes.Equal(dense.Data, stored) {
				t.Error("the input tensor was modified")
			}
			quant := &Tensor{Name: "attn_q", Shape: []int{tc.rows, 32}, Quant: &Affine{
				Weight: stored, Scales: stored, Biases: stored,
			}}
			gq, err := quant.UnpermuteRopeRows(tc.heads)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gq.Quant.Weight, hf) || !bytes.Equal(gq.Quant.Scales, hf) || !bytes.Equal(gq.Quant.Biases, hf) {
				t.Error("quantized rows not restored")
			}
		})
	}
	if _, err := (&Tensor{Name: "x", Shape: []int{6, 2}}).UnpermuteRopeRows(2); err == nil || !strings.Contains(err.Error(), "heads of even size") {
		t.Errorf("odd head size: err = %v", err)
	}
}
