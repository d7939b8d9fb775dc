package audio

import "math"

// The resampling filter: a windowed-sinc low-pass evaluated at each output
// instant (band-limited interpolation, as in Julius O. Smith's resample).
//
//   - cutoff: rolloff × the lower of the two Nyquist frequencies, rolloff 0.94;
//   - support: zeroCrossings zero crossings of the sinc on each side (16);
//   - window: Kaiser with β = kaiserBeta (8.6: about 85 dB stop-band);
//   - arithmetic in float64, samples outside the clip are zero.
//
// When the rates have a small common period (44.1 kHz → 16 kHz repeats every
// 160 output samples) the filter taps of each phase are computed once.
// Resampling between equal rates returns the samples unchanged.
const (
	rolloff       = 0.94
	zeroCrossings = 16
	kaiserBeta    = 8.6
	// maxPhases bounds the tap table (phases × taps float64s).
	maxPhases = 4096
)

// Resample converts x from rate from to rate to.
func Resample(x []float32, from, to int) []float32 {
	if from == to || len(x) == 0 {
		return append([]float32(nil), x...)
	}
	g := gcd(from, to)
	up, down := to/g, from/g // output n sits at input n*down/up
	nOut := int((int64(len(x))*int64(up) + int64(down) - 1) / int64(down))
	// Cutoff in cycles per input sample, relative to the input's Nyquist.
	fc := rolloff * math.Min(1, float64(to)/float64(from))
	half := float64(zeroCrossings) / fc // support half-width in input samples
	taps := 2*int(math.Ceil(half)) + 1
	i0 := kaiserI0(kaiserBeta)
	h := func(d float64) float64 { // d: distance in input samples
		if math.Abs(d) >= half {
			return 0
		}
		z := d / half
		w := kaiserI0(kaiserBeta*math.Sqrt(1-z*z)) / i0
		return fc * sinc(fc*d) * w
	}
	var table [][]float64
	if up <= maxPhases {
		table = make([][]float64, up)
	}
	out := make([]float32, nOut)
	hw := taps / 2
	for n := range out {
		num := int64(n) * int64(down)
		base := int(num / int64(up))
		phase := int(num % int64(up))
		frac := float64(phase) / float64(up)
		var coef []float64
		if table != nil && table[phase] != nil {
			coef = table[phase]
		} else {
			coef = make([]float64, taps)
			for k := range taps {
				coef[k] = h(frac - float64(k-hw))
			}
			if table != nil {
				table[phase] = coef
			}
		}
		var s float64
		for k, c := range coef {
			j := base + k - hw
			if j >= 0 && j < len(x) && c != 0 {
				s += c * float64(x[j])
			}
		}
		out[n] = float32(s)
	}
	return out
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// kaiserI0 is the zeroth-order modified Bessel function of the first kind (its series).
func kaiserI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 64; k++ {
		term *= (x / 2) / float64(k)
		t := term * term
		sum += t
		if t < sum*1e-17 {
			break
		}
	}
	return sum
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
