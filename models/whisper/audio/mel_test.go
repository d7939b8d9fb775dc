package audio

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
)

// TestLogMelChunks: the mel of a long clip computed in chunks of frames
// holds the same bits as one pass (each row depends on its own frame only).
func TestLogMelChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 7*SampleRate+123)
	for i := range x {
		x[i] = float32(0.3*math.Sin(float64(i)*0.05) + 0.05*r.NormFloat64())
	}
	var one, chunked *Mel
	mlxtest.Do(t, func() (err error) {
		defer func(c int) { melChunk = c }(melChunk)
		if one, err = LogMel(x, 80, NSamples); err != nil {
			return err
		}
		melChunk = 1000
		chunked, err = LogMel(x, 80, NSamples)
		return err
	})
	if one.Frames != 3700 || chunked.Frames != one.Frames {
		t.Fatalf("frames %d and %d, want 3700", one.Frames, chunked.Frames)
	}
	for i := range one.Data {
		if math.Float32bits(one.Data[i]) != math.Float32bits(chunked.Data[i]) {
			t.Fatalf("value %d (frame %d): %g in one pass, %g in chunks", i, i/80, one.Data[i], chunked.Data[i])
		}
	}
}
