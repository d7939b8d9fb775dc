package whisper

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// The fixtures testdata/whisper_oracle.py writes (make oracle-whisper).
type oracleResult struct {
	Clip      string `json:"clip"`
	MelFrames int    `json:"mel_frames"`
	Decodings []struct {
		Tokens      []int32 `json:"tokens"`
		Temperature float64 `json:"temperature"`
		Steps       int     `json:"steps"`
		Rows        int     `json:"rows"`
	} `json:"decodings"`
	Text     string    `json:"text"`
	Segments []Segment `json:"segments"`
	FP16     *bool     `json:"fp16"`
	BestOf   int       `json:"best_of"`
}

func oracleDir(t *testing.T) (string, map[string]string) {
	return fixtureIndex(t, "MLXGO_WHISPER_ORACLE_DIR", "whisper", "mlx-whisper oracle fixtures")
}

// fixtureIndex reads the clips of an oracle's index.json: in $env, else in
// .cache/oracle/sub; absent fixtures fail the test (in CI) naming what.
func fixtureIndex(t *testing.T, env, sub, what string) (string, map[string]string) {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), ".cache", "oracle", sub)
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		testenv.Missing(t, what+" ("+err.Error()+")", "make oracle-whisper")
	}
	var idx struct {
		Clips map[string]string `json:"clips"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Clips) == 0 {
		t.Fatalf("%s: %s lists no clips", what, filepath.Join(dir, "index.json"))
	}
	return dir, idx.Clips
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func diff(a, b []float32) (n int, maxAbs float64) {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			n++
			maxAbs = max(maxAbs, math.Abs(float64(a[i])-float64(b[i])))
		}
	}
	return n, maxAbs
}

func temps(r oracleResult) []float64 {
	var out []float64
	for _, d := range r.Decodings {
		out = append(out, d.Temperature)
	}
	return out
}

// TestL1AgainstMLXWhisper: on each recorded clip, mlxgo's mel against
// mlx-whisper's (reported, not required to be bit-identical: the shim has no
// log10); then, fed mlx-whisper's mel, the encoder output of the first window
// and the decoder logits of every step of every decoding (fallbacks and
// long-form windows included) bit-identical, the same tokens, segments and
// text; and from mlxgo's own mel, the same text. faster-whisper's text on
// the same CT2 weights (testdata/whisper_faster.py) must be the same too.
// The "fallback" clip (jfk's first 3.2 s six times) is too repetitive at
// every temperature: its six decodings (0, 0.2, …, 1.0) compare the
// fallback rule and mlx-whisper's sampling from mx.random.seed(0) through
// the same key sequence (whisper.KeySequence), logits and tokens bit for bit;
// "fallback-best5" is that clip with best_of=5: every sampled step's five
// rows of logits (one categorical draw for the group) and the best-ranked
// sample's tokens, segments and text.
func TestL1AgainstMLXWhisper(t *testing.T) {
	dir, clips := oracleDir(t)
	d := loadDecoder(t)
	{
		for name, rel := range clips {
			t.Run(name, func(t *testing.T) {
				b, err := os.ReadFile(filepath.Join(dir, rel))
				if err != nil {
					t.Fatal(err)
				}
				var want oracleResult
				if err := json.Unmarshal(b, &want); err != nil {
					t.Fatal(err)
				}
				cd := filepath.Dir(filepath.Join(dir, rel))
				// fp16=False: mlx-whisper's float32 activations (weights stay float16).
				if want.FP16 != nil && !*want.FP16 {
					run(t, func() error { return d.M.SetActivation(mlx.Float32) })
					defer run(t, func() error { return d.M.SetActivation(d.M.Dtype) })
				}
				f, err := os.Open(want.Clip)
				if err != nil {
					testenv.Missing(t, "clip "+want.Clip, "make oracle-whisper")
				}
				samples, _, err := audio.Load(f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				var ours *audio.Mel
				run(t, func() (err error) { ours, err = audio.LogMel(samples, d.M.Dims.NMels, audio.NSamples); return err })
				theirs := &audio.Mel{Frames: want.MelFrames, NMels: d.M.Dims.NMels, Data: readF32(t, filepath.Join(cd, "mel.f32"))}
				if ours.Frames != theirs.Frames || len(ours.Data) != len(theirs.Data) {
					t.Fatalf("mel: %d frames, mlx-whisper %d", ours.Frames, theirs.Frames)
				}
				n, maxAbs := diff(ours.Data, theirs.Data)
				t.Logf("mel: %d of %d values differ from mlx-whisper's, max abs diff %g", n, len(ours.Data), maxAbs)
				if maxAbs > 1e-5 {
					t.Errorf("mel max abs diff %g > 1e-5", maxAbs)
				}

				// Encoder output of the first window, from mlx-whisper's mel.
				var enc []float32
				run(t, func() (err error) {
					enc, err = d.Encode(theirs.Window(0, min(audio.NFrames, theirs.Frames-audio.NFrames)))
					return err
				})
				if n, m := diff(enc, readF32(t, filepath.Join(cd, "enc0.f32"))); n != 0 {
					t.Errorf("encoder output, window 0: %d values differ, max abs %g", n, m)
				}

				type attempt struct {
					logits [][]float32
					tokens []int32
				}
				var got []attempt
				o := DefaultOptions()
				o.BestOf = want.BestOf
				grow := func(a int) {
					for len(got) <= a {
						got = append(got, attempt{})
					}
				}
				o.Trace = func(a, step int, logits []float32, _ int32) {
					grow(a)
					got[a].logits = append(got[a].logits, logits)
				}
				o.Decoded = func(a int, r *DecodeResult) {
					grow(a)
					got[a].tokens = r.Tokens
				}
				var res *Result
				run(t, func() (err error) {
					res, err = d.TranscribeMel(context.Background(), theirs, float64(len(samples))/audio.SampleRate, o)
					return err
				})
				if len(got) != len(want.Decodings) {
					t.Fatalf("%d decodings, mlx-whisper %d", len(got), len(want.Decodings))
				}
				steps, values := 0, 0
				for i, w := range want.Decodings {
					if !slices.Equal(got[i].tokens, w.Tokens) {
						t.Errorf("decoding %d: tokens\n%v\nmlx-whisper\n%v", i, got[i].tokens, w.Tokens)
					}
					// mlx-whisper runs one step past <|endoftext|> (it checks
					// completion after queueing the next step) and drops it.
					if len(got[i].logits) > w.Steps {
						t.Fatalf("decoding %d: %d steps, mlx-whisper %d", i, len(got[i].logits), w.Steps)
					}
					wl := readF32(t, filepath.Join(cd, "logits"+strconv.Itoa(i)+".f32"))
					// [steps, rows, vocab]: best_of rows per sampled step.
					width := max(w.Rows, 1) * d.M.Dims.NVocab
					if len(wl) != w.Steps*width {
						t.Fatalf("decoding %d: %d logits recorded, want %d steps × %d", i, len(wl), w.Steps, width)
					}
					for s, l := range got[i].logits {
						if len(l) != width {
							t.Fatalf("decoding %d step %d: %d logits, mlx-whisper %d (%d rows)", i, s, len(l), width, w.Rows)
						}
						if n, m := diff(l, wl[s*width:(s+1)*width]); n != 0 {
							t.Errorf("decoding %d step %d: %d logits differ, max abs %g", i, s, n, m)
						}
						steps++
						values += len(l)
					}
				}
				t.Logf("%d decodings, %d steps, %d logits compared bit for bit", len(got), steps, values)
				if res.Text != want.Text {
					t.Errorf("text %q, mlx-whisper %q", res.Text, want.Text)
				}
				if len(res.Segments) != len(want.Segments) {
					t.Fatalf("%d segments, mlx-whisper %d", len(res.Segments), len(want.Segments))
				}
				for i, s := range res.Segments {
					w := want.Segments[i]
					if s.Seek != w.Seek || s.Start != w.Start || s.End != w.End || s.Text != w.Text || !slices.Equal(s.Tokens, w.Tokens) ||
						s.Temperature != w.Temperature || s.AvgLogprob != w.AvgLogprob || s.NoSpeechProb != w.NoSpeechProb ||
						s.CompressionRatio != w.CompressionRatio {
						t.Errorf("segment %d:\n%+v\nmlx-whisper\n%+v", i, s, w)
					}
				}

				// A clip that falls back to sampling is compared to mlx-whisper
				// alone: faster-whisper samples from its own generator, and
				// mlxgo's own mel (one ulp off in places) may move a draw.
				sampled := false
				for _, w := range want.Decodings {
					sampled = sampled || w.Temperature > 0
				}
				if sampled {
					if len(want.Decodings) < 2 {
						t.Fatalf("a sampled clip with %d decodings: no fallback was compared", len(want.Decodings))
					}
					t.Logf("sampled decodings (temperatures %v): no faster-whisper or own-mel comparison", temps(want))
					return
				}

				// faster-whisper on the same CT2 weights (float32 on the CPU:
				// an independent engine, so text, not bits).
				fasterText := func(got string) {
					b, err := os.ReadFile(filepath.Join(dir, "faster", strings.TrimSuffix(name, "-fp32")+".json"))
					if err != nil {
						testenv.Missing(t, "faster-whisper fixture ("+err.Error()+")", "make oracle-whisper")
					}
					var fw struct {
						Text string `json:"text"`
					}
					if err := json.Unmarshal(b, &fw); err != nil {
						t.Fatal(err)
					}
					if got != fw.Text {
						t.Errorf("text %q, faster-whisper %q", got, fw.Text)
					}
				}

				// End to end from mlxgo's own mel (the short clips: each window
				// costs seconds on the CPU pack).
				if theirs.Frames-audio.NFrames > audio.NFrames {
					fasterText(res.Text)
					return
				}
				var own *Result
				run(t, func() (err error) {
					own, err = d.TranscribeMel(context.Background(), ours, float64(len(samples))/audio.SampleRate, DefaultOptions())
					return err
				})
				if own.Text != want.Text {
					t.Errorf("from mlxgo's mel: text %q, mlx-whisper %q", own.Text, want.Text)
				}
				fasterText(own.Text)
			})
		}
	}
}
