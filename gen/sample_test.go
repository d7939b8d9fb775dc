package gen

import (
	"bytes"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
)

// samplerCase mirrors testdata/sample_oracle.py's sampler case.
type samplerCase struct {
	Name            string  `json:"name"`
	Seed            uint64  `json:"seed"`
	Vocab           int     `json:"vocab"`
	Steps           int     `json:"steps"`
	Dtype           string  `json:"dtype"`
	Scale           float32 `json:"scale"`
	LogitsSeed      uint64  `json:"logits_seed"`
	Temp            float64 `json:"temp"`
	TopP            float64 `json:"top_p"`
	MinP            float64 `json:"min_p"`
	MinTokensToKeep int     `json:"min_tokens_to_keep"`
	TopK            int     `json:"top_k"`
	XTCProbability  float64 `json:"xtc_probability"`
	XTCThreshold    float64 `json:"xtc_threshold"`
	XTCSpecial      []int32 `json:"xtc_special_tokens"`
}

type processorCase struct {
	Name                  string             `json:"name"`
	Vocab                 int                `json:"vocab"`
	Dtype                 string             `json:"dtype"`
	Scale                 float32            `json:"scale"`
	LogitsSeed            uint64             `json:"logits_seed"`
	Tokens                []int32            `json:"tokens"`
	LogitBias             map[string]float32 `json:"logit_bias,omitempty"`
	RepetitionPenalty     *float64           `json:"repetition_penalty,omitempty"`
	RepetitionContextSize int                `json:"repetition_context_size,omitempty"`
	PresencePenalty       *float64           `json:"presence_penalty,omitempty"`
	PresenceContextSize   int                `json:"presence_context_size,omitempty"`
	FrequencyPenalty      *float64           `json:"frequency_penalty,omitempty"`
	FrequencyContextSize  int                `json:"frequency_context_size,omitempty"`
}

type oracleOut struct {
	Samplers   map[string]struct{ Tokens []int64 } `json:"samplers"`
	Processors map[string]struct{ Bits []uint32 }  `json:"processors"`
}

func samplerCases() []samplerCase {
	base := samplerCase{Seed: 7, Vocab: 1000, Steps: 24, Dtype: "float32", Scale: 3, LogitsSeed: 100, Temp: 1, MinTokensToKeep: 1}
	with := func(name string, f func(c *samplerCase)) samplerCase {
		c := base
		c.Name = name
		f(&c)
		return c
	}
	return []samplerCase{
		with("greedy", func(c *samplerCase) { c.Temp = 0 }),
		with("temp1", func(c *samplerCase) {}),
		with("temp0.7-seed0", func(c *samplerCase) { c.Temp, c.Seed = 0.7, 0 }),
		with("top-p0.9", func(c *samplerCase) { c.TopP = 0.9 }),
		with("min-p0.1", func(c *samplerCase) { c.MinP = 0.1 }),
		with("min-p0.3-keep5", func(c *samplerCase) { c.MinP, c.MinTokensToKeep = 0.3, 5 }),
		with("top-k10", func(c *samplerCase) { c.TopK = 10 }),
		with("all", func(c *samplerCase) { c.Temp, c.TopP, c.MinP, c.TopK = 0.8, 0.95, 0.05, 40 }),
		with("bf16-all", func(c *samplerCase) { c.Dtype, c.Temp, c.TopP, c.MinP, c.TopK = "bfloat16", 0.6, 0.9, 0.02, 50 }),
		with("f16-top-p", func(c *samplerCase) { c.Dtype, c.Temp, c.TopP = "float16", 1.3, 0.8 }),
		with("flat-temp2", func(c *samplerCase) { c.Scale, c.Temp, c.Seed = 0.5, 2, 12345 }),
		// XTC: always applied, applied half the time (its own draw before
		// categorical's), sparing special tokens, among the other filters.
		with("xtc1", func(c *samplerCase) { c.XTCProbability, c.XTCThreshold = 1, 0.05 }),
		with("xtc0.5", func(c *samplerCase) { c.XTCProbability, c.XTCThreshold, c.Scale = 0.5, 0.1, 5 }),
		with("xtc-special", func(c *samplerCase) {
			c.XTCProbability, c.XTCThreshold, c.Scale, c.XTCSpecial = 0.9, 0.02, 4, []int32{0, 1, 2, 500, 999}
		}),
		with("xtc-bf16-all", func(c *samplerCase) {
			c.Dtype, c.Temp, c.TopP, c.MinP, c.TopK, c.XTCProbability, c.XTCThreshold = "bfloat16", 0.9, 0.95, 0.01, 60, 0.7, 0.08
		}),
	}
}

// dupTokens repeats a few ids many times among singletons (over all 60: 5
// twenty times, 17 eight, 3 five; in the last 20: six, three, two), so that
// frequency penalties accumulate.
var dupTokens = func() []int32 {
	var out []int32
	for i := 0; i < 60; i++ {
		switch {
		case i%3 == 0:
			out = append(out, 5)
		case i%5 == 1:
			out = append(out, 17)
		case i%8 == 2:
			out = append(out, 3)
		default:
			out = append(out, int32(100+i))
		}
	}
	return out
}()

func processorCases() []processorCase {
	f := func(v float64) *float64 { return &v }
	return []processorCase{
		{Name: "repetition", RepetitionPenalty: f(1.3)},
		{Name: "repetition-ctx5", RepetitionPenalty: f(1.1), RepetitionContextSize: 5},
		{Name: "presence", PresencePenalty: f(0.75)},
		{Name: "bias", LogitBias: map[string]float32{"3": 2.5, "900": -100, "17": 0.125}},
		{Name: "all-bf16", Dtype: "bfloat16", LogitBias: map[string]float32{"1": 1.5}, RepetitionPenalty: f(1.2), PresencePenalty: f(0.3)},
		{Name: "repetition-f16", Dtype: "float16", RepetitionPenalty: f(1.5), Tokens: []int32{1}},
		// Frequency: many duplicates, so scatter_add's repeated rounding shows.
		{Name: "frequency", FrequencyPenalty: f(0.3), Tokens: dupTokens},
		{Name: "frequency-bf16", Dtype: "bfloat16", FrequencyPenalty: f(0.3), Tokens: dupTokens},
		{Name: "frequency-bf16-ctx64-negative", Dtype: "bfloat16", FrequencyPenalty: f(-0.7), FrequencyContextSize: 64, Tokens: dupTokens},
		{Name: "frequency-f16-ctx7", Dtype: "float16", FrequencyPenalty: f(1.1), FrequencyContextSize: 7, Tokens: dupTokens},
		{Name: "frequency-one-token", Dtype: "bfloat16", FrequencyPenalty: f(2), Tokens: []int32{999}},
		{Name: "all-four-bf16", Dtype: "bfloat16", LogitBias: map[string]float32{"5": 3.25}, RepetitionPenalty: f(1.2),
			PresencePenalty: f(0.4), FrequencyPenalty: f(0.55), FrequencyContextSize: 30, Tokens: dupTokens},
	}
}

// TestSamplerMatchesMLXLM draws tokens with the same seed, logits and settings
// through gen's sampler and mlx-lm's make_sampler: the sequences must be equal.
func TestSamplerMatchesMLXLM(t *testing.T) {
	mlxtest.Need(t)
	procs := processorCases()
	toks := []int32{5, 17, 17, 3, 999, 42, 5, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 700, 701, 702}
	for i := range procs {
		p := &procs[i]
		p.Vocab, p.Scale, p.LogitsSeed = 1000, 4, uint64(200+i)
		if p.Dtype == "" {
			p.Dtype = "float32"
		}
		if p.Tokens == nil {
			p.Tokens = toks
		}
	}
	want := runOracle(t, samplerCases(), procs)
	// Seeded draws that equal the argmax would not show that the random
	// path is exercised.
	if g, r := want.Samplers["greedy"].Tokens, want.Samplers["temp1"].Tokens; len(g) == 0 || equalInts(g, r) {
		t.Fatalf("temp 1 drew the greedy sequence %v: the oracle cases prove nothing", g)
	}

	for _, tc := range samplerCases() {
		t.Run("sampler/"+tc.Name, func(t *testing.T) {
			ref, ok := want.Samplers[tc.Name]
			if !ok || len(ref.Tokens) != tc.Steps {
				t.Fatalf("oracle gave %d tokens, want %d", len(ref.Tokens), tc.Steps)
			}
			s, err := NewSampler(SamplerOptions{Temp: tc.Temp, TopP: tc.TopP, MinP: tc.MinP, MinTokensToKeep: tc.MinTokensToKeep, TopK: tc.TopK,
				XTCProbability: tc.XTCProbability, XTCThreshold: tc.XTCThreshold, XTCSpecialTokens: tc.XTCSpecial}, tc.Vocab)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			mlxtest.Do(t, func() error {
				if err := mlx.Seed(tc.Seed); err != nil {
					return err
				}
				for i := 0; i < tc.Steps; i++ {
					x := testLogits(tc.Vocab, tc.Dtype, tc.Scale, tc.LogitsSeed+uint64(i))
					lp := mlx.Subtract(x, mlx.LogSumExp(x, nil, true))
					v, err := s.Sample(lp).Item()
					if err != nil {
						return err
					}
					got = append(got, int64(v))
				}
				return nil
			})
			for i := range got {
				if got[i] != ref.Tokens[i] {
					t.Fatalf("step %d: token %d, mlx-lm drew %d\n got %v\nwant %v", i, got[i], ref.Tokens[i], got, ref.Tokens)
				}
			}
		})
	}
	for _, tc := range procs {
		t.Run("processors/"+tc.Name, func(t *testing.T) {
			ref := want.Processors[tc.Name]
			o := ProcessorOptions{RepetitionContextSize: tc.RepetitionContextSize, PresenceContextSize: tc.PresenceContextSize}
			if tc.RepetitionPenalty != nil {
				o.RepetitionPenalty = *tc.RepetitionPenalty
			}
			if tc.PresencePenalty != nil {
				o.PresencePenalty = *tc.PresencePenalty
			}
			if tc.FrequencyPenalty != nil {
				o.FrequencyPenalty, o.FrequencyContextSize = *tc.FrequencyPenalty, tc.FrequencyContextSize
			}
			if len(tc.LogitBias) > 0 {
				o.LogitBias = map[int32]float32{}
				for k, v := range tc.LogitBias {
					var id int32
					if err := json.Unmarshal([]byte(k), &id); err != nil {
						t.Fatal(err)
					}
					o.LogitBias[id] = v
				}
			}
			ps, err := NewProcessors(o, tc.Vocab)
			if err != nil {
				t.Fatal(err)
			}
			var got []float32
			mlxtest.Do(t, func() error {
				x := testLogits(tc.Vocab, tc.Dtype, tc.Scale, tc.LogitsSeed)
				tokens := mlx.FromSlice(tc.Tokens, len(tc.Tokens))
				for _, p := range ps {
					x = p.Process(tokens, x)
				}
				var err error
				got, err = mlx.AsType(x, mlx.Float32).Float32s()
				return err
			})
			if len(got) != len(ref.Bits) {
				t.Fatalf("%d logits, mlx-lm has %d", len(got), len(ref.Bits))
			}
			changed := 0
			for i, v := range got {
				if math.Float32bits(v) != ref.Bits[i] {
					t.Fatalf("logit %d: %v, mlx-lm %v", i, v, math.Float32frombits(ref.Bits[i]))
				}
				if tc.Tokens != nil && v != 0 {
					changed++
				}
			}
			if changed == 0 {
				t.Fatal("all logits are zero: the comparison proves nothing")
			}
		})
	}
}

// testLogits is sample_oracle.py's logits(): normal noise from an explicit key.
func testLogits(vocab int, dtype string, scale float32, seed uint64) *mlx.Array {
	dt, err := mlx.ParseDtype(dtype)
	if err != nil {
		panic(err) // test tables only name valid dtypes
	}
	return mlx.Normal([]int{1, vocab}, dt, 0, scale, mlx.Key(seed))
}

func runOracle(t *testing.T, s []samplerCase, p []processorCase) oracleOut {
	t.Helper()
	py := testenv.Python(t)
	req, err := json.Marshal(map[string]any{"samplers": s, "processors": p})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "sample_oracle.py"))
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sample_oracle.py: %v\n%s", err, stderr.String())
	}
	var res oracleOut
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("sample_oracle.py output: %v", err)
	}
	return res
}

func equalInts(a, b []int64) bool {
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

func TestSamplerOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    SamplerOptions
		ok   bool
	}{
		{"zero is greedy", SamplerOptions{}, true},
		{"greedy ignores filters", SamplerOptions{TopK: 5000, TopP: 7}, true},
		{"negative temp", SamplerOptions{Temp: -1}, false},
		{"nan temp", SamplerOptions{Temp: math.NaN()}, false},
		{"top-p above 1", SamplerOptions{Temp: 1, TopP: 1.5}, false},
		{"top-p 1 is off", SamplerOptions{Temp: 1, TopP: 1}, true},
		{"min-p above 1", SamplerOptions{Temp: 1, MinP: 2}, false},
		{"negative keep", SamplerOptions{Temp: 1, MinP: 0.1, MinTokensToKeep: -3}, false},
		{"top-k at vocab", SamplerOptions{Temp: 1, TopK: 1000}, false},
		{"top-k below vocab", SamplerOptions{Temp: 1, TopK: 999}, true},
		{"negative top-k", SamplerOptions{Temp: 1, TopK: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSampler(tc.o, 1000)
			if (err == nil) != tc.ok {
				t.Fatalf("NewSampler(%+v) error %v, want ok=%v", tc.o, err, tc.ok)
			}
		})
	}
}

func TestNewProcessorsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    ProcessorOptions
		n    int
		ok   bool
	}{
		{"none", ProcessorOptions{}, 0, true},
		{"repetition", ProcessorOptions{RepetitionPenalty: 1.1}, 1, true},
		{"negative repetition", ProcessorOptions{RepetitionPenalty: -1}, 0, false},
		{"bias out of vocab", ProcessorOptions{LogitBias: map[int32]float32{1000: 1}}, 0, false},
		{"all three", ProcessorOptions{LogitBias: map[int32]float32{1: 1}, RepetitionPenalty: 1.1, PresencePenalty: 0.5}, 3, true},
		{"all four", ProcessorOptions{LogitBias: map[int32]float32{1: 1}, RepetitionPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: 0.5}, 4, true},
		{"negative frequency", ProcessorOptions{FrequencyPenalty: -0.5}, 1, true},
		{"nan frequency", ProcessorOptions{FrequencyPenalty: math.NaN()}, 0, false},
		{"infinite frequency", ProcessorOptions{FrequencyPenalty: math.Inf(1)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := NewProcessors(tc.o, 1000)
			if (err == nil) != tc.ok || len(ps) != tc.n {
				t.Fatalf("NewProcessors: %d processors, error %v; want %d, ok=%v", len(ps), err, tc.n, tc.ok)
			}
		})
	}
}
