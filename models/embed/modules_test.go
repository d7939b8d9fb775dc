package embed_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/models/embed"
)

const stModules = `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}%s]`

const normalizeModule = `,{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}`

func TestParseModules(t *testing.T) {
	cases := []struct {
		name, modules, pooling string
		want                   embed.Pipeline
		err                    string
	}{
		{"mean+normalize", strings.Replace(stModules, "%s", normalizeModule, 1), `{"pooling_mode_mean_tokens":true}`, embed.Pipeline{Pooling: embed.PoolMean, Normalize: true}, ""},
		{"cls", strings.Replace(stModules, "%s", "", 1), `{"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":false}`, embed.Pipeline{Pooling: embed.PoolCLS}, ""},
		{"lasttoken", strings.Replace(stModules, "%s", normalizeModule, 1), `{"pooling_mode_lasttoken":true}`, embed.Pipeline{Pooling: embed.PoolLast, Normalize: true}, ""},
		{"pooling_mode string", strings.Replace(stModules, "%s", "", 1), `{"pooling_mode":"max"}`, embed.Pipeline{Pooling: embed.PoolMax}, ""},
		{"two modes", strings.Replace(stModules, "%s", "", 1), `{"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":true}`, embed.Pipeline{}, "turns on 2 modes"},
		{"no mode", strings.Replace(stModules, "%s", "", 1), `{}`, embed.Pipeline{}, "turns on 0 modes"},
		{"mean sqrt", strings.Replace(stModules, "%s", "", 1), `{"pooling_mode_mean_sqrt_len_tokens":true}`, embed.Pipeline{}, "not supported"},
		{"dense module", strings.Replace(stModules, "%s", `,{"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"}`, 1), `{"pooling_mode_mean_tokens":true}`, embed.Pipeline{}, "Dense"},
		{"pooling first", `[{"type":"sentence_transformers.models.Pooling","path":"p"}]`, `{"pooling_mode_mean_tokens":true}`, embed.Pipeline{}, "not supported here"},
		{"no pooling", `[{"type":"sentence_transformers.models.Transformer"}]`, ``, embed.Pipeline{}, "no Pooling module"},
		{"empty", `[]`, ``, embed.Pipeline{}, "no modules"},
		{"not json", `{`, ``, embed.Pipeline{}, "cannot parse modules.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := embed.ParseModules([]byte(tc.modules), func(path string) ([]byte, error) {
				if tc.pooling == "" {
					return nil, os.ErrNotExist
				}
				return []byte(tc.pooling), nil
			})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *p != tc.want {
				t.Errorf("pipeline %+v, want %+v", *p, tc.want)
			}
		})
	}
}

func TestTooLongError(t *testing.T) {
	var err error = &embed.TooLongError{Index: 3, Tokens: 300, Max: 256}
	var tl *embed.TooLongError
	if !errors.As(err, &tl) || err.Error() != "input 3 has 300 tokens, more than the model's maximum of 256" {
		t.Errorf("got %q", err)
	}
}

// FuzzParseModules: any bytes give a pipeline or an error, never a panic,
// and a pipeline always names a pooling mode we implement.
func FuzzParseModules(f *testing.F) {
	f.Add([]byte(strings.Replace(stModules, "%s", normalizeModule, 1)), []byte(`{"pooling_mode_mean_tokens":true}`))
	f.Add([]byte(`[{"type":"x.Transformer"},{"type":"Pooling"}]`), []byte(`{"pooling_mode":"cls"}`))
	f.Fuzz(func(t *testing.T, modules, pooling []byte) {
		p, err := embed.ParseModules(modules, func(string) ([]byte, error) { return pooling, nil })
		if err != nil {
			return
		}
		switch p.Pooling {
		case embed.PoolMean, embed.PoolCLS, embed.PoolMax, embed.PoolLast:
		default:
			t.Fatalf("pooling %q", p.Pooling)
		}
	})
}
