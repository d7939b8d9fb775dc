package silero

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// modelPath is silero_vad_v5.onnx as make data-silero fetches it.
func modelPath(t testing.TB) string {
	t.Helper()
	return testenv.DataFile(t, "silero/silero_vad_v5.onnx")
}

// TestProbsAgainstOnnxruntime: on each clip testdata/whisper_vad.py
// recorded, every frame's speech probability is within 1e-5 of
// onnxruntime's on the same ONNX file, and the speech segments are exactly
// silero-vad 5.1.2's get_speech_timestamps with its defaults.
func TestProbsAgainstOnnxruntime(t *testing.T) {
	m, err := Load(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("MLXGO_SILERO_ORACLE_DIR")
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), ".cache", "oracle", "silero")
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		testenv.Missing(t, "silero oracle fixtures ("+err.Error()+")", "make oracle-whisper")
	}
	var idx struct {
		Clips map[string]string `json:"clips"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.Clips) == 0 {
		t.Fatalf("silero oracle index: %v, %d clips", err, len(idx.Clips))
	}
	for name, rel := range idx.Clips {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			var want struct {
				Clip     string    `json:"clip"`
				Samples  int       `json:"samples"`
				Probs    []float32 `json:"probs"`
				Segments [][2]int  `json:"segments"`
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			x := readWAV16(t, want.Clip)
			if len(x) != want.Samples {
				t.Fatalf("%d samples, the oracle read %d", len(x), want.Samples)
			}
			got := m.Probs(x)
			if len(got) != len(want.Probs) {
				t.Fatalf("%d frames, onnxruntime %d", len(got), len(want.Probs))
			}
			var worst float64
			for i := range got {
				worst = max(worst, math.Abs(float64(got[i])-float64(want.Probs[i])))
			}
			t.Logf("%d frames, max abs diff from onnxruntime %.3g", len(got), worst)
			if worst > 1e-5 {
				t.Errorf("max abs diff %g > 1e-5", worst)
			}
			var segs [][2]int
			for _, s := range SpeechTimestamps(got, len(x), DefaultParams()) {
				segs = append(segs, [2]int{s.Start, s.End})
			}
			if len(want.Segments) == 0 || !slices.Equal(segs, want.Segments) {
				t.Errorf("segments %v\nget_speech_timestamps %v", segs, want.Segments)
			}
		})
	}
}

// readWAV16 reads a 16 kHz mono 16-bit WAV's samples as the oracle does
// (int16 / 32768), skipping to the data chunk.
func readWAV16(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		testenv.Missing(t, "clip "+path, "make oracle-whisper")
	}
	for i := 12; i+8 <= len(b); {
		id, n := string(b[i:i+4]), int(uint32(b[i+4])|uint32(b[i+5])<<8|uint32(b[i+6])<<16|uint32(b[i+7])<<24)
		if id == "data" {
			d := b[i+8 : min(len(b), i+8+n)]
			out := make([]float32, len(d)/2)
			for j := range out {
				out[j] = float32(int16(uint16(d[2*j])|uint16(d[2*j+1])<<8)) / 32768
			}
			return out
		}
		i += 8 + n + n%2
	}
	t.Fatalf("%s has no data chunk", path)
	return nil
}

// TestLoadErrors: every prefix of the real file, and files that are not
// Silero, give an error and never a panic.
func TestLoadErrors(t *testing.T) {
	b, err := os.ReadFile(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromONNX(b); err != nil {
		t.Fatalf("the real file: %v", err)
	}
	for _, n := range []int{0, 1, 7, 100, 4096, len(b) / 3, len(b) / 2, len(b) - 1} {
		if _, err := FromONNX(b[:n]); err == nil {
			t.Errorf("a prefix of %d bytes loaded", n)
		}
	}
	for _, bad := range [][]byte{[]byte("not onnx at all"), {0x3a, 0x00}, {0x3a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0x78}} {
		if _, err := FromONNX(bad); err == nil {
			t.Errorf("%q loaded", bad)
		}
	}
}

// FuzzParseModel: the protobuf reader never panics or allocates without
// bound, whatever the bytes (go test -fuzz FuzzParseModel ./models/silero;
// the corpus is kept in testdata/fuzz).
func FuzzParseModel(f *testing.F) {
	// A ModelProto whose graph has a Conv node with an int list attribute
	// and a raw float initializer, and one with an If holding a subgraph.
	f.Add([]byte{0x3a, 0x2d, 0x0a, 0x16, 0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x22, 0x04, 'C', 'o', 'n', 'v', 0x2a, 0x08, 0x0a, 0x01, 's', 0x40, 0x07, 0x42, 0x01, 0x02,
		0x2a, 0x13, 0x08, 0x02, 0x10, 0x01, 0x42, 0x01, 'w', 0x4a, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40})
	f.Add([]byte{0x3a, 0x12, 0x0a, 0x10, 0x22, 0x02, 'I', 'f', 0x2a, 0x0a, 0x0a, 0x01, 't', 0x32, 0x05, 0x0a, 0x03, 0x22, 0x01, 'X'})
	if b, err := os.ReadFile(filepath.Join(testenv.DataDir(), "silero", "silero_vad_v5.onnx")); err == nil {
		f.Add(b[:2048])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseModel(b)
		if err == nil && g == nil {
			t.Fatal("no graph and no error")
		}
		FromONNX(b)
	})
}
