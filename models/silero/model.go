// Package silero is the Silero VAD v5 voice-activity detector, read from its
// ONNX file (npm @ricky0123/vad-web's dist/silero_vad_v5.onnx) and run in
// Go: speech probabilities per 32 ms frame of 16 kHz audio, and the speech
// segments of silero-vad's get_speech_timestamps.
//
// The ONNX graph is not interpreted: its 16 kHz branch (the If node on
// sr == 16000) holds the weights as Constant nodes, and the network they
// belong to is small and fixed (an STFT as a convolution, four
// convolutions, an LSTM cell, a 1×1 convolution and a sigmoid), written out
// here and checked against the graph's shapes at load. It runs in float64
// accumulations over float32 weights, within 1e-5 of onnxruntime
// (TestProbsAgainstOnnxruntime). It never touches MLX.
package silero

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
)

// Frame geometry at 16 kHz, as silero-vad's OnnxWrapper feeds the model:
// 512 new samples after the last 64 of the frame before.
const (
	SampleRate = 16000
	FrameSize  = 512
	context    = 64
	stateSize  = 128
)

// Model is the 16 kHz network of Silero VAD v5.
type Model struct {
	basis     []float32 // [2*bins, 1, nfft]: the STFT's real then imaginary filters
	nfft, hop int
	bins      int
	enc       [4]conv
	wih, whh  []float32 // [4*128, 128], gates i, f, g, o (torch's LSTMCell)
	bih, bhh  []float32
	outW      []float32 // [128]
	outB      float32
}

type conv struct {
	w            []float32 // [out, in, 3]
	b            []float32
	in, out, str int
}

// Load reads the ONNX file at path.
func Load(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load silero vad: %w", err)
	}
	m, err := FromONNX(b)
	if err != nil {
		return nil, fmt.Errorf("cannot load silero vad from %s: %w", path, err)
	}
	return m, nil
}

// FromONNX builds the model from the bytes of silero_vad_v5.onnx.
func FromONNX(b []byte) (*Model, error) {
	g, err := ParseModel(b)
	if err != nil {
		return nil, err
	}
	br, err := branch16k(g)
	if err != nil {
		return nil, err
	}
	consts := map[string]*Tensor{}
	var convs []*Node
	for _, n := range br.Nodes {
		switch n.Op {
		case "Constant":
			if a := n.Attrs["value"]; a != nil && a.T != nil && len(n.Outputs) == 1 {
				consts[n.Outputs[0]] = a.T
			}
		case "Conv":
			convs = append(convs, n)
		}
	}
	for k, t := range br.Inits {
		consts[k] = t
	}
	get := func(suffix string, dims ...int64) ([]float32, error) {
		for name, t := range consts {
			if strings.HasSuffix(name, "__"+suffix) || name == suffix {
				if len(t.Dims) != len(dims) || t.Dtype != dtFloat {
					return nil, fmt.Errorf("%s has dims %v, want %v", suffix, t.Dims, dims)
				}
				for i := range dims {
					if dims[i] >= 0 && t.Dims[i] != dims[i] {
						return nil, fmt.Errorf("%s has dims %v, want %v", suffix, t.Dims, dims)
					}
				}
				return t.F, nil
			}
		}
		return nil, fmt.Errorf("the 16 kHz branch has no %s: not Silero VAD v5", suffix)
	}
	m := &Model{}
	// The STFT, then the encoder: the graph's six convolutions in order.
	if len(convs) != 6 {
		return nil, fmt.Errorf("the 16 kHz branch has %d convolutions, Silero VAD v5 has 6", len(convs))
	}
	strides := make([]int, len(convs))
	for i, n := range convs {
		a := n.Attrs["strides"]
		if a == nil || len(a.Ints) != 1 {
			return nil, fmt.Errorf("convolution %s has no stride", n.Name)
		}
		strides[i] = int(a.Ints[0])
	}
	if m.basis, err = get("stft.forward_basis_buffer", -1, 1, -1); err != nil {
		return nil, err
	}
	t := consts[findSuffix(consts, "stft.forward_basis_buffer")]
	m.nfft, m.bins, m.hop = int(t.Dims[2]), int(t.Dims[0]/2), strides[0]
	if m.nfft != 256 || m.hop != 128 || m.bins != 129 {
		return nil, fmt.Errorf("STFT of %d/%d with %d bins, want 256/128 and 129", m.nfft, m.hop, m.bins)
	}
	in := m.bins
	for i, out := range []int{128, 64, 64, 128} {
		c := conv{in: in, out: out, str: strides[i+1]}
		if c.w, err = get(fmt.Sprintf("encoder.%d.reparam_conv.weight", i), int64(out), int64(in), 3); err != nil {
			return nil, err
		}
		if c.b, err = get(fmt.Sprintf("encoder.%d.reparam_conv.bias", i), int64(out)); err != nil {
			return nil, err
		}
		m.enc[i], in = c, out
	}
	if m.wih, err = get("decoder.rnn.weight_ih", 4*stateSize, stateSize); err != nil {
		return nil, err
	}
	if m.whh, err = get("decoder.rnn.weight_hh", 4*stateSize, stateSize); err != nil {
		return nil, err
	}
	if m.bih, err = get("decoder.rnn.bias_ih", 4*stateSize); err != nil {
		return nil, err
	}
	if m.bhh, err = get("decoder.rnn.bias_hh", 4*stateSize); err != nil {
		return nil, err
	}
	if m.outW, err = get("decoder.decoder.2.weight", 1, stateSize, 1); err != nil {
		return nil, err
	}
	ob, err := get("decoder.decoder.2.bias", 1)
	if err != nil {
		return nil, err
	}
	m.outB = ob[0]
	// The four frames of one input must shrink to one step of the LSTM.
	if n := m.steps(); n != 1 {
		return nil, fmt.Errorf("the encoder leaves %d time steps, want 1", n)
	}
	return m, nil
}

func findSuffix(consts map[string]*Tensor, suffix string) string {
	for name := range consts {
		if strings.HasSuffix(name, "__"+suffix) || name == suffix {
			return name
		}
	}
	return ""
}

// branch16k is the then-branch of the top-level If on sr == 16000.
func branch16k(g *Graph) (*Graph, error) {
	for _, n := range g.Nodes {
		if n.Op != "If" {
			continue
		}
		if a := n.Attrs["then_branch"]; a != nil && a.G != nil {
			return a.G, nil
		}
	}
	return nil, errors.New("the graph has no If node with a 16 kHz branch: not Silero VAD v5")
}

// frames is the STFT's frame count for one input.
func (m *Model) frames() int { return (context+FrameSize+context-m.nfft)/m.hop + 1 }

func (m *Model) steps() int {
	n := m.frames()
	for _, c := range m.enc {
		n = (n+2-3)/c.str + 1
	}
	return n
}

// State is the LSTM's h and c between frames.
type State struct{ h, c [stateSize]float64 }

// Prob is one call of the ONNX model: x is 64 context samples then 512 new
// ones; st is updated.
func (m *Model) Prob(x []float32, st *State) float32 {
	// Reflect-pad 64 samples on the right (ONNX Pad, mode reflect).
	n := len(x)
	xp := make([]float64, n+context)
	for i, v := range x {
		xp[i] = float64(v)
	}
	for j := 0; j < context; j++ {
		xp[n+j] = float64(x[n-2-j])
	}
	// STFT as a strided convolution; the magnitude of each bin.
	nf := m.frames()
	feat := make([]float64, m.bins*nf)
	for t := 0; t < nf; t++ {
		seg := xp[t*m.hop : t*m.hop+m.nfft]
		for k := 0; k < m.bins; k++ {
			var re, im float64
			wr := m.basis[k*m.nfft : (k+1)*m.nfft]
			wi := m.basis[(k+m.bins)*m.nfft : (k+m.bins+1)*m.nfft]
			for i, s := range seg {
				re += float64(wr[i]) * s
				im += float64(wi[i]) * s
			}
			feat[k*nf+t] = math.Sqrt(re*re + im*im)
		}
	}
	// Encoder: kernel 3, padding 1, ReLU.
	l := nf
	for _, c := range m.enc {
		lo := (l+2-3)/c.str + 1
		out := make([]float64, c.out*lo)
		for o := 0; o < c.out; o++ {
			for t := 0; t < lo; t++ {
				s := float64(c.b[o])
				for i := 0; i < c.in; i++ {
					w := c.w[(o*c.in+i)*3:]
					for k := 0; k < 3; k++ {
						if p := t*c.str + k - 1; p >= 0 && p < l {
							s += float64(w[k]) * feat[i*l+p]
						}
					}
				}
				out[o*lo+t] = max(s, 0)
			}
		}
		feat, l = out, lo
	}
	// LSTM cell (torch's gate order i, f, g, o), ReLU, 1×1 conv, sigmoid.
	var gates [4 * stateSize]float64
	for r := range gates {
		s := float64(m.bih[r]) + float64(m.bhh[r])
		wi, wh := m.wih[r*stateSize:(r+1)*stateSize], m.whh[r*stateSize:(r+1)*stateSize]
		for j := 0; j < stateSize; j++ {
			s += float64(wi[j])*feat[j] + float64(wh[j])*st.h[j]
		}
		gates[r] = s
	}
	out := float64(m.outB)
	for j := 0; j < stateSize; j++ {
		i, f := sigmoid(gates[j]), sigmoid(gates[stateSize+j])
		g, o := math.Tanh(gates[2*stateSize+j]), sigmoid(gates[3*stateSize+j])
		st.c[j] = f*st.c[j] + i*g
		st.h[j] = o * math.Tanh(st.c[j])
		out += float64(m.outW[j]) * max(st.h[j], 0)
	}
	return float32(sigmoid(out))
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Probs is the speech probability of every 512-sample frame of 16 kHz
// audio, the last zero-padded, as get_speech_timestamps computes them
// (model state and context reset at the start).
func (m *Model) Probs(samples []float32) []float32 {
	var st State
	buf := make([]float32, context+FrameSize)
	var out []float32
	for start := 0; start < len(samples); start += FrameSize {
		copy(buf, buf[FrameSize:]) // the last 64 samples become the context
		chunk := buf[context:]
		n := copy(chunk, samples[start:min(start+FrameSize, len(samples))])
		clear(chunk[n:])
		out = append(out, m.Prob(buf, &st))
	}
	return out
}
