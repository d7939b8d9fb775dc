package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Where a resolved sampling value came from, as x_mlxgo.sampling_from
// records it.
const (
	FromRequest          = "request"
	FromFlag             = "flag"
	FromGenerationConfig = "generation_config.json"
	FromDefault          = "default" // mlx_lm.server's
)

// SamplingDefaults are values for the sampling fields a request leaves out;
// nil: not given at this level. A request's value wins, then the flags'
// (Config.Flags), then the model's generation_config.json
// (Config.GenerationConfig), then mlx_lm.server's defaults (temperature 0,
// top_p 1, top_k 0, min_p 0, no repetition penalty, max_tokens
// Config.MaxTokens).
type SamplingDefaults struct {
	Temperature, TopP, MinP, RepetitionPenalty *float64
	TopK, MaxTokens                            *int
}

// String lists the values given, "" when none is.
func (d SamplingDefaults) String() string {
	var out []string
	for _, f := range []struct {
		name string
		v    *float64
	}{{"temperature", d.Temperature}, {"top_p", d.TopP}, {"min_p", d.MinP}, {"repetition_penalty", d.RepetitionPenalty}} {
		if f.v != nil {
			out = append(out, fmt.Sprintf("%s=%g", f.name, *f.v))
		}
	}
	if d.TopK != nil {
		out = append(out, fmt.Sprintf("top_k=%d", *d.TopK))
	}
	if d.MaxTokens != nil {
		out = append(out, fmt.Sprintf("max_tokens=%d", *d.MaxTokens))
	}
	return strings.Join(out, " ")
}

// Validate checks the values as the request fields are checked; src names
// where they come from in the error.
func (d SamplingDefaults) Validate(src string) error {
	bad := func(field, want string, v any) error {
		return fmt.Errorf("%s: %s %v: want %s", src, field, v, want)
	}
	finite := func(v *float64) bool { return v == nil || !(math.IsNaN(*v) || math.IsInf(*v, 0)) }
	switch {
	case !finite(d.Temperature) || (d.Temperature != nil && *d.Temperature < 0):
		return bad("temperature", "a finite value >= 0", *d.Temperature)
	case !finite(d.TopP) || (d.TopP != nil && (*d.TopP <= 0 || *d.TopP > 1)):
		return bad("top_p", "a value in (0, 1]", *d.TopP)
	case !finite(d.MinP) || (d.MinP != nil && (*d.MinP < 0 || *d.MinP > 1)):
		return bad("min_p", "a value in [0, 1]", *d.MinP)
	case !finite(d.RepetitionPenalty) || (d.RepetitionPenalty != nil && *d.RepetitionPenalty < 0):
		return bad("repetition_penalty", "a value >= 0", *d.RepetitionPenalty)
	case d.TopK != nil && *d.TopK < 0:
		return bad("top_k", "0 (off) or a positive integer", *d.TopK)
	case d.MaxTokens != nil && *d.MaxTokens < 1:
		return bad("max_tokens", "at least 1", *d.MaxTokens)
	}
	return nil
}

// ReadGenerationConfig reads the sampling defaults of generation_config.json
// in the model directory dir, as Hugging Face's GenerationConfig names them:
// temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens.
// do_sample false means greedy decoding in transformers, so its sampling
// values are then not taken (temperature stays at the next level's). A
// file that is absent (or dir that is a GGUF file) gives no defaults.
func ReadGenerationConfig(dir string) (SamplingDefaults, error) {
	var d SamplingDefaults
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return d, nil
	}
	path := filepath.Join(dir, "generation_config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("cannot read %s: %w", path, err)
	}
	var g struct {
		DoSample          *bool    `json:"do_sample"`
		Temperature       *float64 `json:"temperature"`
		TopP              *float64 `json:"top_p"`
		TopK              *int     `json:"top_k"`
		MinP              *float64 `json:"min_p"`
		RepetitionPenalty *float64 `json:"repetition_penalty"`
		MaxNewTokens      *int     `json:"max_new_tokens"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return d, fmt.Errorf("cannot read %s: %w", path, err)
	}
	d.RepetitionPenalty, d.MaxTokens = g.RepetitionPenalty, g.MaxNewTokens
	if g.DoSample == nil || *g.DoSample {
		d.Temperature, d.TopP, d.TopK, d.MinP = g.Temperature, g.TopP, g.TopK, g.MinP
	}
	if d.RepetitionPenalty != nil && *d.RepetitionPenalty == 1 {
		d.RepetitionPenalty = nil // transformers' "off"; mlx-lm's is 0
	}
	if err := d.Validate(path); err != nil {
		return SamplingDefaults{}, err
	}
	return d, nil
}

// resolveSampling fills in every sampling field the request left out and
// records where each value came from.
func (s *Server) resolveSampling(p *params) map[string]string {
	flags, gc := s.cfg.Flags, s.cfg.GenerationConfig
	return map[string]string{
		"temperature":        pick(p.given["temperature"], &p.sampler.Temp, flags.Temperature, gc.Temperature, 0),
		"top_p":              pick(p.given["top_p"], &p.sampler.TopP, flags.TopP, gc.TopP, 1),
		"top_k":              pick(p.given["top_k"], &p.sampler.TopK, flags.TopK, gc.TopK, 0),
		"min_p":              pick(p.given["min_p"], &p.sampler.MinP, flags.MinP, gc.MinP, 0),
		"repetition_penalty": pick(p.given["repetition_penalty"], &p.procs.RepetitionPenalty, flags.RepetitionPenalty, gc.RepetitionPenalty, 0),
		"max_tokens":         pick(p.given["max_tokens"], &p.maxTokens, flags.MaxTokens, gc.MaxTokens, s.cfg.MaxTokens),
	}
}

// pick sets *dst from the first level that has a value, the request's (already
// in *dst when given) first, and names that level.
func pick[T any](given bool, dst *T, flag, file *T, def T) string {
	switch {
	case given:
		return FromRequest
	case flag != nil:
		*dst = *flag
		return FromFlag
	case file != nil:
		*dst = *file
		return FromGenerationConfig
	default:
		*dst = def
		return FromDefault
	}
}
