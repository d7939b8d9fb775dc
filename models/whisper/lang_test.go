package whisper

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// loadBase loads the multilingual Whisper base (CTranslate2, make
// data-whisper) with a tokenizer for task, closed at the end of the test.
func loadBase(t testing.TB, task string) *Decoder {
	t.Helper()
	return loadDecoderAt(t, filepath.Dir(testenv.DataFile(t, filepath.Join("whisper-base-ct2", "model.bin"))), task)
}

// TestL1LanguageDetection: Whisper base (99 languages) against mlx-whisper
// 0.4.3's transcribe(language=None) on the same weights and libmlx
// (testdata/whisper_lang.py, make oracle-whisper), task transcribe and
// translate: detect_language's logits at <|startoftranscript|> bit-identical,
// every language's probability and the detected language identical; then
// the whole transcription with that language and task: every step's logits
// bit-identical, the same tokens, segments and text. The "-words" fixtures
// (word_timestamps=True, the model's alignment heads) compare every word,
// its start, end and probability too.
func TestL1LanguageDetection(t *testing.T) {
	dir, clips := fixtureIndex(t, "MLXGO_WHISPER_LANG_ORACLE_DIR", "whisper-lang", "mlx-whisper language oracle fixtures")
	base := loadBase(t, "transcribe")
	decoders := map[string]*Decoder{"transcribe": base}
	names := make([]string, 0, len(clips))
	for name := range clips {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rel := clips[name]
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			var want struct {
				oracleResult
				Task           string  `json:"task"`
				WordTimestamps bool    `json:"word_timestamps"`
				Language       string  `json:"language"`
				LanguageToken  int32   `json:"language_token"`
				LanguageProbs  [][]any `json:"language_probs"`
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			d := decoders[want.Task]
			if d == nil {
				run(t, func() error {
					tk, err := base.Tok.WithTask("", want.Task)
					if err == nil {
						d, err = NewDecoder(base.M, tk)
					}
					return err
				})
				decoders[want.Task] = d
			}
			if !d.Tok.Multilingual() || d.Tok.NumLanguages != 99 {
				t.Fatalf("whisper base: multilingual %v, %d languages, want 99", d.Tok.Multilingual(), d.Tok.NumLanguages)
			}
			cd := filepath.Dir(filepath.Join(dir, rel))
			mel := &audio.Mel{Frames: want.MelFrames, NMels: d.M.Dims.NMels, Data: readF32(t, filepath.Join(cd, "mel.f32"))}
			if len(mel.Data) != mel.Frames*mel.NMels {
				t.Fatalf("mel.f32 holds %d values, want %d×%d", len(mel.Data), mel.Frames, mel.NMels)
			}

			var lr *LanguageResult
			run(t, func() (err error) { lr, err = d.DetectLanguage(mel.Window(0, audio.NFrames)); return err })
			if n, m := diff(lr.Logits, readF32(t, filepath.Join(cd, "lang_logits.f32"))); n != 0 || len(lr.Logits) != d.M.Dims.NVocab {
				t.Errorf("logits at <|startoftranscript|>: %d of %d differ, max abs %g", n, len(lr.Logits), m)
			}
			if len(want.LanguageProbs) != len(lr.Probs) {
				t.Fatalf("%d language probabilities, mlx-whisper %d", len(lr.Probs), len(want.LanguageProbs))
			}
			// detect_language's dict follows the tokenizer's special-token
			// order, not the language order: compare by code.
			wantP := map[string]float64{}
			for _, kv := range want.LanguageProbs {
				wantP[kv[0].(string)] = kv[1].(float64)
			}
			for i, p := range lr.Probs {
				if w, ok := wantP[Languages[i]]; !ok || w != p {
					t.Errorf("language %s: p %v, mlx-whisper %v (listed %v)", Languages[i], p, w, ok)
				}
			}
			if lr.Language != want.Language || d.Tok.SOT+1+int32(slices.Index(Languages, lr.Language)) != want.LanguageToken {
				t.Errorf("detected %q, mlx-whisper %q (token %d)", lr.Language, want.Language, want.LanguageToken)
			}
			t.Logf("detected %s, p %.6f, %d logits and %d probabilities compared bit for bit", lr.Language,
				lr.Probs[slices.Index(Languages, lr.Language)], len(lr.Logits), len(lr.Probs))

			var got [][][]float32
			var tokens [][]int32
			o := DefaultOptions()
			o.DetectLanguage = true
			o.WordTimestamps = want.WordTimestamps
			o.Trace = func(a, step int, logits []float32, tok int32) {
				for len(got) <= a {
					got, tokens = append(got, nil), append(tokens, nil)
				}
				got[a] = append(got[a], logits)
				if tok != d.Tok.EOT {
					tokens[a] = append(tokens[a], tok)
				}
			}
			var res *Result
			run(t, func() (err error) {
				res, err = d.TranscribeMel(context.Background(), mel, float64(mel.Frames-audio.NFrames)*audio.HopLength/audio.SampleRate, o)
				return err
			})
			if res.Language != want.Language || res.Detected == nil {
				t.Errorf("transcription language %q (detected %v), mlx-whisper %q", res.Language, res.Detected != nil, want.Language)
			}
			if len(got) != len(want.Decodings) {
				t.Fatalf("%d decodings, mlx-whisper %d", len(got), len(want.Decodings))
			}
			steps := 0
			vocab := d.M.Dims.NVocab
			for i, w := range want.Decodings {
				if !slices.Equal(tokens[i], w.Tokens) {
					t.Errorf("decoding %d: tokens\n%v\nmlx-whisper\n%v", i, tokens[i], w.Tokens)
				}
				if len(got[i]) > w.Steps {
					t.Fatalf("decoding %d: %d steps, mlx-whisper %d", i, len(got[i]), w.Steps)
				}
				wl := readF32(t, filepath.Join(cd, "logits"+strconv.Itoa(i)+".f32"))
				for s, l := range got[i] {
					if n, m := diff(l, wl[s*vocab:(s+1)*vocab]); n != 0 {
						t.Errorf("decoding %d step %d: %d logits differ, max abs %g", i, s, n, m)
					}
					steps++
				}
			}
			if steps == 0 {
				t.Fatal("no decoding step was compared")
			}
			t.Logf("%s: %d decodings, %d steps compared bit for bit; text %q", want.Task, len(got), steps, res.Text)
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
					s.CompressionRatio != w.CompressionRatio || !slices.Equal(s.Words, w.Words) {
					t.Errorf("segment %d:\n%+v\nmlx-whisper\n%+v", i, s, w)
				}
			}
			if want.WordTimestamps {
				n := 0
				for _, s := range res.Segments {
					n += len(s.Words)
				}
				if n == 0 {
					t.Fatal("word timestamps: no words to compare")
				}
				t.Logf("word timestamps: %d words, times and probabilities identical", n)
			}
		})
	}
}

// TestDetectLanguageEnglishOnly: tiny.en has no language tokens; detection
// is an error, and DetectLanguage in Options is ignored (mlx-whisper sets
// "en" without detecting).
func TestDetectLanguageEnglishOnly(t *testing.T) {
	d := loadDecoder(t)
	if len(d.Tok.LanguageTokens()) != 0 {
		t.Fatalf("tiny.en: %d language tokens", len(d.Tok.LanguageTokens()))
	}
	err := mlx.Do(func() error {
		_, err := d.DetectLanguage(make([]float32, audio.NFrames*d.M.Dims.NMels))
		return err
	})
	if err == nil {
		t.Fatal("DetectLanguage on tiny.en: no error")
	}
}
