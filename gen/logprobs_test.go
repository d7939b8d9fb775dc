package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// logprobCase mirrors testdata/logprobs_oracle.py's case.
type logprobCase struct {
	Name                 string  `json:"name"`
	Model                string  `json:"model"`
	Prompt               []int32 `json:"prompt"`
	Steps                int     `json:"steps"`
	Seed                 uint64  `json:"seed"`
	Temp                 float64 `json:"temp"`
	TopP                 float64 `json:"top_p"`
	MinP                 float64 `json:"min_p"`
	TopK                 int     `json:"top_k"`
	RepetitionPenalty    float64 `json:"repetition_penalty"`
	PresencePenalty      float64 `json:"presence_penalty"`
	FrequencyPenalty     float64 `json:"frequency_penalty"`
	FrequencyContextSize int     `json:"frequency_context_size"`
	Top                  int     `json:"top"`
}

type logprobStep struct {
	Token   int32    `json:"token"`
	Bits    uint32   `json:"bits"`
	TopIDs  []int32  `json:"top_ids"`
	TopBits []uint32 `json:"top_bits"`
}

// TestLogprobsMatchMLXLM runs Generate with a Logprobs callback and mlx-lm's
// generate_step on the same tiny models, seeds and processors (the frequency
// penalty among them): tokens, each token's log-probability and the top
// alternatives (ids and values) must be bit-identical.
func TestLogprobsMatchMLXLM(t *testing.T) {
	mlxtest.Need(t)
	cases := []logprobCase{
		{Name: "greedy-llama-f32-top20", Model: "llama-f32", Steps: 24, Top: 20},
		{Name: "sample-qwen3-bf16-frequency", Model: "qwen3-bf16", Steps: 32, Seed: 5, Temp: 0.9, TopP: 0.95,
			FrequencyPenalty: 0.8, Top: 20},
		{Name: "sample-llama-q4-all-penalties", Model: "llama-q4g64", Steps: 32, Seed: 17, Temp: 1.1, MinP: 0.02, TopK: 40,
			RepetitionPenalty: 1.15, PresencePenalty: 0.3, FrequencyPenalty: 0.45, FrequencyContextSize: 32, Top: 5},
		{Name: "greedy-qwen2-bf16-frequency-token-only", Model: "qwen2-bf16", Steps: 24, FrequencyPenalty: 1.5, Top: 0},
	}
	for i := range cases {
		cases[i].Prompt = promptIDs(21, 512)
		cases[i].Model = oracleModelDir(t, cases[i].Model)
	}
	want := runLogprobsOracle(t, cases)
	ties := 0
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			ref := want[tc.Name]
			if len(ref) != tc.Steps {
				t.Fatalf("mlx-lm gave %d steps, want %d", len(ref), tc.Steps)
			}
			var got []Logprob
			var toks []int32
			mlxtest.Do(t, func() error {
				m, err := models.Load(tc.Model, models.LoadOptions{})
				if err != nil {
					return err
				}
				defer m.Close()
				if err := mlx.Seed(tc.Seed); err != nil {
					return err
				}
				o := Options{
					MaxTokens: tc.Steps,
					Sampler:   SamplerOptions{Temp: tc.Temp, TopP: tc.TopP, MinP: tc.MinP, TopK: tc.TopK},
					Processors: ProcessorOptions{RepetitionPenalty: tc.RepetitionPenalty, PresencePenalty: tc.PresencePenalty,
						FrequencyPenalty: tc.FrequencyPenalty, FrequencyContextSize: tc.FrequencyContextSize},
					VocabSize:   m.Info().VocabSize,
					Logprobs:    func(l Logprob) { got = append(got, l) },
					TopLogprobs: tc.Top,
				}
				_, err = Generate(context.Background(), m, tc.Prompt, o, func(tok int32) error {
					if len(got) != len(toks)+1 || got[len(got)-1].Token != tok {
						t.Errorf("emit(%d) after %d Logprobs calls for %d tokens: want one call for this token just before", tok, len(got), len(toks))
					}
					toks = append(toks, tok)
					return nil
				})
				return err
			})
			if len(got) != len(ref) {
				t.Fatalf("%d Logprobs calls, mlx-lm made %d steps", len(got), len(ref))
			}
			for i, r := range ref {
				g := got[i]
				if g.Token != r.Token || math.Float32bits(g.Logprob) != r.Bits {
					t.Fatalf("step %d: token %d logprob %v, mlx-lm token %d logprob %v",
						i, g.Token, g.Logprob, r.Token, math.Float32frombits(r.Bits))
				}
				if len(g.Top) != len(r.TopIDs) {
					t.Fatalf("step %d: %d alternatives, want %d", i, len(g.Top), len(r.TopIDs))
				}
				for j, a := range g.Top {
					if a.Token != r.TopIDs[j] || math.Float32bits(a.Logprob) != r.TopBits[j] {
						t.Fatalf("step %d top %d: token %d logprob %v, mlx-lm token %d logprob %v",
							i, j, a.Token, a.Logprob, r.TopIDs[j], math.Float32frombits(r.TopBits[j]))
					}
					if j > 0 && a.Logprob == g.Top[j-1].Logprob {
						ties++
					}
				}
			}
		})
	}
	// bfloat16 log-probabilities tie often; without a tie the order of
	// equal values would be untested.
	if ties == 0 {
		t.Error("no tied values among the top alternatives: the tie order is untested")
	}
}

func runLogprobsOracle(t *testing.T, cases []logprobCase) map[string][]logprobStep {
	t.Helper()
	py := testenv.Python(t)
	req, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "logprobs_oracle.py"))
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("logprobs_oracle.py: %v\n%s", err, stderr.String())
	}
	var res map[string][]logprobStep
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("logprobs_oracle.py output: %v", err)
	}
	return res
}

func TestReadLogprobs(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	vals := []float32{-2, -0.5, -3, -0.5, -inf, nan, -0.25, -0.5, -1}
	for _, tc := range []struct {
		name    string
		dtype   string
		shape   []int
		tok     int32
		top     int
		want    Logprob
		wantErr bool
	}{
		{name: "token only", dtype: "float32", shape: []int{1, 9}, tok: 2, want: Logprob{Token: 2, Logprob: -3}},
		{name: "ties by lower id", dtype: "float32", shape: []int{9}, tok: 3, top: 4,
			want: Logprob{Token: 3, Logprob: -0.5, Top: []TokenLogprob{{6, -0.25}, {1, -0.5}, {3, -0.5}, {7, -0.5}}}},
		{name: "cut inside a tie", dtype: "float32", shape: []int{1, 9}, tok: 0, top: 2,
			want: Logprob{Token: 0, Logprob: -2, Top: []TokenLogprob{{6, -0.25}, {1, -0.5}}}},
		{name: "-inf then nan last", dtype: "float32", shape: []int{9}, tok: 4, top: 20,
			want: Logprob{Token: 4, Logprob: -inf, Top: []TokenLogprob{{6, -0.25}, {1, -0.5}, {3, -0.5}, {7, -0.5}, {8, -1}, {0, -2}, {2, -3}, {4, -inf}, {5, nan}}}},
		{name: "bfloat16 widened exactly", dtype: "bfloat16", shape: []int{1, 9}, tok: 8, top: 1,
			want: Logprob{Token: 8, Logprob: -1, Top: []TokenLogprob{{6, -0.25}}}},
		{name: "float16", dtype: "float16", shape: []int{9}, tok: 6, top: 1,
			want: Logprob{Token: 6, Logprob: -0.25, Top: []TokenLogprob{{6, -0.25}}}},
		{name: "token out of range", dtype: "float32", shape: []int{9}, tok: 9, wantErr: true},
		{name: "negative token", dtype: "float32", shape: []int{9}, tok: -1, wantErr: true},
		{name: "top above 20", dtype: "float32", shape: []int{9}, top: 21, wantErr: true},
		{name: "negative top", dtype: "float32", shape: []int{9}, top: -1, wantErr: true},
		{name: "two rows", dtype: "float32", shape: []int{3, 3}, wantErr: true},
		{name: "int dtype", dtype: "int32", shape: []int{9}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Logprob
			var err error
			mlxtest.Do(t, func() error {
				dt, perr := mlx.ParseDtype(tc.dtype)
				if perr != nil {
					return perr
				}
				a := mlx.AsType(mlx.FromSlice(vals, tc.shape...), dt)
				got, err = readLogprobs(a, tc.tok, tc.top)
				return nil
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("readLogprobs error %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if !sameLogprob(got, tc.want) {
				t.Fatalf("readLogprobs = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// sameLogprob compares bit patterns, so NaN equals NaN.
func sameLogprob(a, b Logprob) bool {
	if a.Token != b.Token || math.Float32bits(a.Logprob) != math.Float32bits(b.Logprob) || len(a.Top) != len(b.Top) {
		return false
	}
	for i := range a.Top {
		if a.Top[i].Token != b.Top[i].Token || isNaN32(a.Top[i].Logprob) != isNaN32(b.Top[i].Logprob) ||
			!isNaN32(a.Top[i].Logprob) && a.Top[i].Logprob != b.Top[i].Logprob {
			return false
		}
	}
	return true
}

// FuzzTopLogprobs checks the insertion selection against a full stable sort
// on arbitrary float32 rows (NaN, infinities and ties included).
func FuzzTopLogprobs(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 192, 127, 0, 0, 128, 255}, uint8(3))
	f.Add(bytes.Repeat([]byte{0, 0, 0, 191}, 40), uint8(20))
	f.Fuzz(func(t *testing.T, raw []byte, k uint8) {
		vals := make([]float32, len(raw)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		n := min(int(k)%(MaxTopLogprobs+1), len(vals))
		got := topLogprobs(vals, n)
		ids := make([]int, len(vals))
		for i := range ids {
			ids[i] = i
		}
		sort.SliceStable(ids, func(a, b int) bool { return before(vals[ids[a]], ids[a], vals[ids[b]], ids[b]) })
		if len(got) != n {
			t.Fatalf("%d entries, want %d", len(got), n)
		}
		for i := range got {
			if int(got[i].Token) != ids[i] {
				t.Fatalf("rank %d: token %d, a full sort gives %d (values %v)", i, got[i].Token, ids[i], vals)
			}
		}
	})
}

// BenchmarkReadLogprobs is the host-side cost Options.Logprobs adds per
// token on a SmolLM2-sized vocabulary (the row copy plus the selection).
func BenchmarkReadLogprobs(b *testing.B) {
	mlxtest.Need(b)
	for _, bc := range []struct {
		dtype string
		top   int
	}{{"float32", 0}, {"float32", 20}, {"bfloat16", 20}} {
		b.Run(fmt.Sprintf("%s-top%d", bc.dtype, bc.top), func(b *testing.B) {
			mlxtest.Do(b, func() error {
				dt, err := mlx.ParseDtype(bc.dtype)
				if err != nil {
					return err
				}
				x := mlx.Normal([]int{1, 49152}, dt, 0, 4, mlx.Key(2))
				lp := mlx.Subtract(x, mlx.LogSumExp(x, nil, true))
				if err := mlx.Eval(lp); err != nil {
					return err
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := readLogprobs(lp, 7, bc.top); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}
