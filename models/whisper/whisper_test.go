package whisper

import (
	"context"
	"os"
	"path/filepath"
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
// the end of the test. MLX calls must run inside mlx.Do (run, below), and
// nothing inside may call t.Fatal: that would end the executor's goroutine.
func loadDecoder(t testing.TB) *Decoder {
	t.Helper()
	dir := tinyEN(t)
	mlxtest.Need(t)
	var d *Decoder
	err := mlx.Do(func() error {
		m, err := Load(dir)
		if err != nil {
			return err
		}
		tk, err := LoadTokenizer(dir, m.Dims, "", "transcribe")
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

func TestTranscribeJFK(t *testing.T) {
	x := loadClip(t, filepath.Join("audio", "jfk.wav"))
	d := loadDecoder(t)
	var r *Result
	run(t, func() (err error) {
		r, err = d.Transcribe(context.Background(), x, DefaultOptions())
		return err
	})
	// tiny.en in float16 drops the commas mlx-whisper's float32 run and
	// larger models write; mlx-whisper's float16 run does the same.
	want := " And so my fellow Americans ask not what your country can do for you ask what you can do for your country"
	if r.Text != want {
		t.Errorf("text %q, want %q", r.Text, want)
	}
	if len(r.Segments) != 2 || r.Segments[0].Start != 0 || r.Segments[1].End != 10.74 {
		t.Errorf("segments %+v", r.Segments)
	}
}
