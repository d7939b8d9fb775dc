package audio

import (
	"errors"
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// Whisper's front end (mlx-whisper 0.4.3's audio.py, OpenAI Whisper's).
const (
	NFFT       = 400
	HopLength  = 160
	ChunkSec   = 30
	NSamples   = ChunkSec * SampleRate // 480000 samples in a 30-second window
	NFrames    = NSamples / HopLength  // 3000 mel frames in a window
	FramesPerS = SampleRate / HopLength
)

// MelFilters is librosa.filters.mel(sr=16000, n_fft=400, n_mels=nMels) —
// Slaney's mel scale and area normalization, fmin 0, fmax 8 kHz — as a
// row-major [nMels][201] float32 matrix, computed here in float64 with the
// same operations and the same roundings to float32 as librosa (its weights
// array is float32, so each triangle value is rounded before the Slaney
// factor multiplies it in float64 and rounds again). mlx-whisper loads the
// same matrix from its mel_filters.npz (mel_test.go compares them).
func MelFilters(nMels int) []float32 {
	const sr, nfft = SampleRate, NFFT
	nBins := 1 + nfft/2
	// np.fft.rfftfreq(n, d=1/sr): i * (1 / (n*d)).
	d := 1.0 / float64(sr)
	val := 1.0 / (float64(nfft) * d)
	fft := make([]float64, nBins)
	for i := range fft {
		fft[i] = float64(i) * val
	}
	// mel_frequencies(n_mels+2, 0, sr/2): linspace on the mel scale, back to Hz.
	n := nMels + 2
	lo, hi := hzToMel(0), hzToMel(float64(sr)/2)
	step := (hi - lo) / float64(n-1)
	melF := make([]float64, n)
	for i := range melF {
		melF[i] = melToHz(float64(i)*step + lo)
	}
	melF[n-1] = melToHz(hi)
	w := make([]float32, nMels*nBins)
	for i := range nMels {
		fd0, fd1 := melF[i+1]-melF[i], melF[i+2]-melF[i+1]
		enorm := 2.0 / (melF[i+2] - melF[i])
		for j, f := range fft {
			lower := -(melF[i] - f) / fd0
			upper := (melF[i+2] - f) / fd1
			v := float32(math.Max(0, math.Min(lower, upper)))
			w[i*nBins+j] = float32(float64(v) * enorm)
		}
	}
	return w
}

// Slaney's mel scale, as librosa.hz_to_mel / mel_to_hz (htk=False).
const (
	fSp       = 200.0 / 3
	minLogHz  = 1000.0
	minLogMel = minLogHz / fSp
)

var logStep = math.Log(6.4) / 27.0

func hzToMel(f float64) float64 {
	if f >= minLogHz {
		return minLogMel + math.Log(f/minLogHz)/logStep
	}
	return f / fSp
}

func melToHz(m float64) float64 {
	if m >= minLogMel {
		return minLogHz * math.Exp(logStep*(m-minLogMel))
	}
	return fSp * m
}

// hann is np.hanning(401)[:-1] rounded to float32 (mlx-whisper's window).
func hann() []float32 {
	w := make([]float32, NFFT)
	for i := range w {
		w[i] = float32(0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(NFFT)))
	}
	return w
}

// Mel is a log-mel spectrogram: Frames rows of NMels values, row-major.
type Mel struct {
	Frames, NMels int
	Data          []float32
}

// LogMel computes Whisper's log-mel spectrogram of 16 kHz samples with
// padding zero samples appended (mlx-whisper's transcribe passes 30 s):
// reflect-padded frames of 400 samples every 160, a Hann window, the real FFT,
// |X|² of every frame but the last, the mel filters, log10 of at least 1e-10,
// clamped at the maximum − 8, then (x + 4) / 4. Everything up to the mel
// energies runs on MLX with mlx-whisper's ops, so those are bit-identical;
// the log10 is Go's float64 log10 rounded to float32 (the shim has no
// log10; MLX's is the C library's log10f), and the rest float32 arithmetic.
// Call it on the MLX executor.
func LogMel(samples []float32, nMels, padding int) (*Mel, error) {
	if nMels != 80 && nMels != 128 {
		return nil, fmt.Errorf("%d mel bins: Whisper uses 80 or 128", nMels)
	}
	n := len(samples) + padding
	if n < 2*(NFFT/2)+1 {
		return nil, errors.New("audio too short for one STFT frame")
	}
	pad := NFFT / 2
	// The reflect padding and the strided frames are copies of sample values:
	// built here, they hold the same floats as mx.concatenate/as_strided.
	x := make([]float32, n+2*pad)
	copy(x[pad:], samples)
	for i := 0; i < pad; i++ {
		x[pad-1-i] = x[pad+1+i]   // prefix = x[1:pad+1][::-1]
		x[pad+n+i] = x[pad+n-2-i] // suffix = x[-(pad+1):-1][::-1]
	}
	t := (len(x) - NFFT + HopLength) / HopLength
	// Every frame but the last, in chunks of melChunk frames: each output
	// depends on its own frame only (one rfft row, one matmul row), so the
	// chunks hold the same floats one pass would, without an hour of audio
	// costing gigabytes of frames at once.
	nBins := NFFT/2 + 1
	filters := MelFilters(nMels)
	win := hann()
	vals := make([]float32, 0, (t-1)*nMels)
	// The last chunk is a full one that overlaps the one before (its first
	// rows are dropped), so that no matmul runs on a handful of rows, which
	// MLX could send to a matrix-vector kernel of another summation order.
	total := t - 1
	size := min(melChunk, total)
	for done := 0; done < total; {
		f0 := min(done, total-size)
		frames := make([]float32, size*NFFT)
		for f := range size {
			copy(frames[f*NFFT:(f+1)*NFFT], x[(f0+f)*HopLength:])
		}
		v, err := melEnergies(frames, size, win, filters, nMels, nBins)
		if err != nil {
			return nil, fmt.Errorf("cannot compute the mel spectrogram: %w", err)
		}
		vals = append(vals, v[(done-f0)*nMels:]...)
		done = f0 + size
	}
	mx := float32(math.Inf(-1))
	for i, v := range vals {
		l := float32(math.Log10(float64(v)))
		vals[i] = l
		if l > mx {
			mx = l
		}
	}
	floor := mx - 8
	for i, v := range vals {
		vals[i] = (max(v, floor) + 4) / 4
	}
	return &Mel{Frames: t - 1, NMels: nMels, Data: vals}, nil
}

// melChunk is how many STFT frames one MLX pass takes (a variable for tests).
var melChunk = 8192

// melEnergies is mlx-whisper's stft and mel projection for n frames:
// max(|rfft(frame · window)|² @ filtersᵀ, 1e-10).
func melEnergies(frames []float32, n int, window, filters []float32, nMels, nBins int) ([]float32, error) {
	s := mlx.NewScope()
	defer s.Close()
	fr := mlx.FromSlice(frames, n, NFFT)
	spec := mlx.RFFT(mlx.Multiply(fr, mlx.FromSlice(window, NFFT)), NFFT, -1)
	mag := mlx.Square(mlx.Abs(spec))
	filt := mlx.FromSlice(filters, nMels, nBins)
	return mlx.Maximum(mlx.Matmul(mag, mlx.Transpose(filt)), mlx.Scalar(1e-10, mlx.Float32)).Float32s()
}

// Window returns frames [seek, seek+size) of m padded with zeros (or cut) to
// NFrames rows, as mlx-whisper's mel[seek:seek+size] and pad_or_trim do.
func (m *Mel) Window(seek, size int) []float32 {
	out := make([]float32, NFrames*m.NMels)
	end := min(seek+size, m.Frames, seek+NFrames)
	if seek < end {
		copy(out, m.Data[seek*m.NMels:end*m.NMels])
	}
	return out
}
