package whisper

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// fasterBeam is what testdata/whisper_faster.py --beam-size writes per clip.
type fasterBeam struct {
	Clip     string  `json:"clip"`
	Text     string  `json:"text"`
	BeamSize int     `json:"beam_size"`
	Patience float64 `json:"patience"`
	Segments []struct {
		Start  float64 `json:"start"`
		End    float64 `json:"end"`
		Text   string  `json:"text"`
		Tokens []int32 `json:"tokens"`
	} `json:"segments"`
}

// TestBeamSearchAgainstFasterWhisper: mlx-whisper 0.4.3 has no beam search
// (DecodingTask raises NotImplementedError for beam_size), so the oracle is
// faster-whisper 1.2.1 (CTranslate2 4.8.5, float32 on the CPU) on the same CT2
// tiny.en weights with beam_size 5 and patience 1 (make oracle-whisper,
// faster-beam5/): from mlxgo's own mel, with --beam-size 5, the same text and
// the same tokens, timestamps included, segment by segment, on jfk, a
// LibriVox clip and the 41 s two-window clip.
func TestBeamSearchAgainstFasterWhisper(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), ".cache", "oracle", "whisper", "faster-beam5")
	if env := os.Getenv("MLXGO_WHISPER_ORACLE_DIR"); env != "" {
		dir = filepath.Join(env, "faster-beam5")
	}
	names := []string{"jfk", "sense_and_sensibility_01_austen_64kb-0870", "longform"}
	var want []fasterBeam
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			testenv.Missing(t, "faster-whisper beam-search fixture ("+err.Error()+")", "make oracle-whisper")
		}
		var w fasterBeam
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		if w.BeamSize != 5 {
			t.Fatalf("%s: beam_size %d in the fixture, want 5", name, w.BeamSize)
		}
		want = append(want, w)
	}
	d := loadDecoder(t)
	for i, name := range names {
		w := want[i]
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(w.Clip)
			if err != nil {
				testenv.Missing(t, "clip "+w.Clip, "make oracle-whisper")
			}
			samples, _, err := audio.Load(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.BeamSize, o.Patience = 5, 1
			beamDecodings := 0
			o.Decoded = func(_ int, r *DecodeResult) {
				if r.Temperature == 0 {
					beamDecodings++
				}
			}
			var res *Result
			run(t, func() (err error) { res, err = d.Transcribe(context.Background(), samples, o); return err })
			if beamDecodings == 0 {
				t.Fatal("no decoding at temperature 0: beam search was not exercised")
			}
			if res.Text != w.Text {
				t.Errorf("text %q, faster-whisper %q", res.Text, w.Text)
			}
			var segs []Segment
			for _, s := range res.Segments {
				if len(s.Tokens) > 0 {
					segs = append(segs, s)
				}
			}
			if len(segs) != len(w.Segments) {
				t.Fatalf("%d segments, faster-whisper %d", len(segs), len(w.Segments))
			}
			for j, s := range segs {
				ws := w.Segments[j]
				if !slices.Equal(s.Tokens, ws.Tokens) || strings.TrimSpace(s.Text) != strings.TrimSpace(ws.Text) {
					t.Errorf("segment %d: %q %v\nfaster-whisper %q %v", j, s.Text, s.Tokens, ws.Text, ws.Tokens)
				}
			}
			t.Logf("%d segments, text %q", len(segs), res.Text)
		})
	}
}
