package whisper

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// tinyEN is the CTranslate2 tiny.en directory make data-whisper fetches.
func tinyEN(t testing.TB) string {
	t.Helper()
	return filepath.Dir(testenv.DataFile(t, filepath.Join("whisper-tiny.en-ct2", "model.bin")))
}

func loadClip(t testing.TB, rel string) []float32 {
	t.Helper()
	f, err := os.Open(testenv.DataFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, _, err := audio.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// loadDecoder loads tiny.en and its tokenizer on the executor, closed at
// the end of the test.
func loadDecoder(t testing.TB) *Decoder {
	t.Helper()
	return loadDecoderAt(t, tinyEN(t), "transcribe")
}

// loadDecoderAt loads the model in dir with a tokenizer for task. MLX calls
// must run inside mlx.Do (run, below), and nothing inside may call t.Fatal:
// that would end the executor's goroutine.
func loadDecoderAt(t testing.TB, dir, task string) *Decoder {
	t.Helper()
	mlxtest.Need(t)
	var d *Decoder
	err := mlx.Do(func() error {
		m, err := Load(dir)
		if err != nil {
			return err
		}
		tk, err := LoadTokenizer(dir, m.Dims, "", task)
		if err != nil {
			m.Close()
			return err
		}
		if d, err = NewDecoder(m, tk); err != nil {
			m.Close()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mlx.Do(func() error { d.M.Close(); return nil }) })
	return d
}

// run runs f on the executor and fails t on its error.
func run(t testing.TB, f func() error) {
	t.Helper()
	if err := mlx.Do(f); err != nil {
		t.Fatal(err)
	}
}

// TestLoadMLXLayout: the oracle's conversion of tiny.en to mlx-whisper's
// layout (config.json + weights.safetensors) loads to the same dimensions and
// the same weights as the CT2 model.bin it came from.
func TestLoadMLXLayout(t *testing.T) {
	mdir := filepath.Join(testenv.RepoRoot(), ".cache", "oracle", "whisper", "model-mlx")
	if _, err := os.Stat(filepath.Join(mdir, "weights.safetensors")); err != nil {
		testenv.Missing(t, "mlx-whisper layout of tiny.en ("+err.Error()+")", "make oracle-whisper")
	}
	d := loadDecoder(t)
	var same []string
	run(t, func() error {
		m, err := Load(mdir)
		if err != nil {
			return err
		}
		defer m.Close()
		if m.Dims != d.M.Dims || m.Dtype != d.M.Dtype {
			t.Errorf("mlx layout: %+v %s, CT2: %+v %s", m.Dims, m.Dtype, d.M.Dims, d.M.Dtype)
		}
		pairs := map[string][2]*mlx.Array{
			"conv1":                 {m.conv1w, d.M.conv1w},
			"token embedding":       {m.tokEmb, d.M.tokEmb},
			"decoder 3 cross value": {m.decBlocks[3].cross.value.w, d.M.decBlocks[3].cross.value.w},
			"encoder 2 query bias":  {m.encBlocks[2].attn.query.b, d.M.encBlocks[2].attn.query.b},
		}
		for name, p := range pairs {
			a, err := p[0].Bytes()
			if err != nil {
				return err
			}
			b, err := p[1].Bytes()
			if err != nil {
				return err
			}
			if string(a) != string(b) {
				t.Errorf("%s differs between the layouts", name)
			} else {
				same = append(same, name)
			}
		}
		return nil
	})
	t.Logf("same bytes: %v", same)
}

// TestTemperatureFallback: with a log-probability threshold no window can
// meet (0), every temperature is tried and the last one's result is kept;
// sampling at temperature > 0 is reproducible from the seed. (mlx-whisper
// samples from MLX's global key, so only greedy decodings are held to its
// bits in TestL1AgainstMLXWhisper.)
func TestTemperatureFallback(t *testing.T) {
	x := loadClip(t, filepath.Join("audio", "pocketsphinx", "cards", "001.wav"))
	d := loadDecoder(t)
	o := DefaultOptions()
	o.Temperatures = []float64{0, 1}
	o.LogprobThreshold = 0
	o.NoSpeechThreshold = math.NaN()
	o.Seed = 42
	var a, b *Result
	run(t, func() (err error) {
		if a, err = d.Transcribe(context.Background(), x, o); err != nil {
			return err
		}
		b, err = d.Transcribe(context.Background(), x, o)
		return err
	})
	if a.Windows != 1 || a.Fallbacks != 1 || len(a.Segments) == 0 || a.Segments[0].Temperature != 1 {
		t.Fatalf("windows %d, fallbacks %d, segments %+v: want one window decoded again at temperature 1", a.Windows, a.Fallbacks, a.Segments)
	}
	if a.Text != b.Text || !slices.Equal(a.Segments[0].Tokens, b.Segments[0].Tokens) {
		t.Errorf("same seed, different samples: %q and %q", a.Text, b.Text)
	}
	t.Logf("at temperature 1: %q", a.Text)
}
