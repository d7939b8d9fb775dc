package audio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// wav builds a WAV file: tag 1 (PCM), 3 (float) or 0xFFFE (EXTENSIBLE over
// sub-format sub), with data as given.
func wav(tag uint16, sub uint16, channels, rate, bits int, data []byte) []byte {
	var fmtc bytes.Buffer
	w := func(v any) { binary.Write(&fmtc, binary.LittleEndian, v) }
	w(tag)
	w(uint16(channels))
	w(uint32(rate))
	w(uint32(rate * channels * bits / 8))
	w(uint16(channels * bits / 8))
	w(uint16(bits))
	if tag == formatExtensible {
		w(uint16(22))
		w(uint16(bits))
		w(uint32(0))
		w(sub)
		fmtc.Write([]byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71})
	}
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+fmtc.Len()+8+len(data)))
	b.WriteString("WAVE")
	b.WriteString("LIST")
	binary.Write(&b, binary.LittleEndian, uint32(3))
	b.Write([]byte{1, 2, 3, 0}) // odd size + pad byte
	b.WriteString("fmt ")
	binary.Write(&b, binary.LittleEndian, uint32(fmtc.Len()))
	b.Write(fmtc.Bytes())
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

func le(vals ...any) []byte {
	var b bytes.Buffer
	for _, v := range vals {
		binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

func TestDecodeWAVFormats(t *testing.T) {
	cases := []struct {
		name string
		file []byte
		ch   int
		want []float32
	}{
		{"pcm8", wav(1, 0, 1, 8000, 8, []byte{0, 128, 255}), 1, []float32{-1, 0, 127.0 / 128}},
		{"pcm16", wav(1, 0, 1, 16000, 16, le(int16(-32768), int16(0), int16(16384))), 1, []float32{-1, 0, 0.5}},
		{"pcm24", wav(1, 0, 1, 16000, 24, []byte{0, 0, 0x80, 0xff, 0xff, 0xff, 0, 0, 0x40}), 1, []float32{-1, -1.0 / 8388608, 0.5}},
		{"pcm32", wav(1, 0, 1, 16000, 32, le(int32(math.MinInt32), int32(1<<30))), 1, []float32{-1, 0.5}},
		{"float32", wav(3, 0, 1, 16000, 32, le(float32(0.25), float32(-1.5))), 1, []float32{0.25, -1.5}},
		{"float64", wav(3, 0, 1, 16000, 64, le(0.25, -0.75)), 1, []float32{0.25, -0.75}},
		{"extensible pcm16 stereo", wav(formatExtensible, 1, 2, 44100, 16, le(int16(16384), int16(-16384), int16(8192), int16(8192))), 2, []float32{0.5, -0.5, 0.25, 0.25}},
		{"extensible float", wav(formatExtensible, 3, 1, 16000, 32, le(float32(0.125))), 1, []float32{0.125}},
		{"partial last frame dropped", wav(1, 0, 2, 16000, 16, le(int16(0), int16(0), int16(5))), 2, []float32{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeWAV(bytes.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if c.Channels != tc.ch || len(c.Samples) != len(tc.want) {
				t.Fatalf("channels %d samples %v, want %d %v", c.Channels, c.Samples, tc.ch, tc.want)
			}
			for i := range tc.want {
				if c.Samples[i] != tc.want[i] {
					t.Fatalf("samples %v, want %v", c.Samples, tc.want)
				}
			}
		})
	}
}

func TestMono(t *testing.T) {
	c := &Clip{Rate: 16000, Channels: 2, Samples: []float32{1, 0, 0.5, 0.25}}
	if m := c.Mono(); len(m) != 2 || m[0] != 0.5 || m[1] != 0.375 {
		t.Fatalf("mono %v", m)
	}
}

func TestDecodeWAVErrors(t *testing.T) {
	good := wav(1, 0, 1, 16000, 16, le(int16(1), int16(2)))
	streamed := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(streamed[4:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(streamed[len(streamed)-8:], 0xFFFFFFFF)
	if c, err := DecodeWAV(bytes.NewReader(streamed)); err != nil || len(c.Samples) != 2 {
		t.Fatalf("streamed WAV (unknown sizes): %v, %v", c, err)
	}
	bigData := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(bigData[len(bigData)-8:], 1<<30)
	cases := []struct {
		name string
		file []byte
		msg  string
	}{
		{"empty", nil, "empty input"},
		{"short header", []byte("RIFF"), "truncated WAV header"},
		{"not wav", []byte("ID3\x03\x00\x00\x00\x00\x00\x00\x00\x00 mp3 data"), "not a WAV file"},
		{"truncated data", good[:len(good)-1], "truncated WAV data: the header declares 4 bytes, the file holds 3"},
		{"huge declared data", bigData, "truncated WAV data"},
		{"no data", good[:len(good)-12], "no data chunk"},
		{"mulaw", wav(7, 0, 1, 8000, 8, []byte{1}), "format tag 0x0007 is not supported"},
		{"pcm12", wav(1, 0, 1, 8000, 12, []byte{1}), "PCM with 12 bits"},
		{"zero channels", wav(1, 0, 0, 8000, 16, nil), "0 channels"},
		{"rate zero", wav(1, 0, 1, 0, 16, nil), "sample rate 0 Hz"},
		{"nan", wav(3, 0, 1, 16000, 32, le(float32(math.NaN()))), "NaN"},
		{"ext bad guid", func() []byte {
			b := wav(formatExtensible, 1, 1, 16000, 16, le(int16(1)))
			i := bytes.Index(b, []byte{0x10, 0x00, 0x80, 0x00})
			b[i] = 0x11
			return b
		}(), "sub-format"},
		{"truncated list", []byte("RIFF\x00\x01\x00\x00WAVELIST\xff\x00\x00\x00ab"), "truncated WAV \"LIST\" chunk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeWAV(bytes.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
		})
	}
}

// FuzzDecodeWAV: any bytes decode or fail with an error, never panic, and
// never yield more samples than the input has bytes.
func FuzzDecodeWAV(f *testing.F) {
	f.Add(wav(1, 0, 1, 16000, 16, le(int16(1), int16(2))))
	f.Add(wav(formatExtensible, 3, 2, 44100, 32, le(float32(0.5), float32(0.5))))
	f.Add(wav(1, 0, 2, 8000, 24, []byte{1, 2, 3, 4, 5, 6}))
	f.Add(wav(1, 0, 1, 8000, 8, []byte{1, 2, 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeWAV(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(c.Samples) > len(b) || c.Channels < 1 || c.Rate < 1 {
			t.Fatalf("clip %d samples, %d channels, %d Hz from %d bytes", len(c.Samples), c.Channels, c.Rate, len(b))
		}
		if len(c.Samples)%c.Channels != 0 {
			t.Fatalf("%d samples for %d channels", len(c.Samples), c.Channels)
		}
		if c.Frames() < 64 && c.Rate <= 48000 {
			_ = Resample(c.Mono(), c.Rate, SampleRate)
		}
	})
}

func TestResample(t *testing.T) {
	// A 440 Hz tone at 44.1 kHz and 8 kHz: away from the edges the 16 kHz
	// result is the same tone within the filter's ripple.
	for _, from := range []int{44100, 8000, 48000, 22050} {
		n := from // one second
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(0.5 * math.Sin(2*math.Pi*440*float64(i)/float64(from)))
		}
		y := Resample(x, from, SampleRate)
		if want := SampleRate; len(y) != want {
			t.Fatalf("%d Hz: %d samples, want %d", from, len(y), want)
		}
		var maxErr float64
		for i := 1000; i < len(y)-1000; i++ {
			want := 0.5 * math.Sin(2*math.Pi*440*float64(i)/SampleRate)
			maxErr = max(maxErr, math.Abs(float64(y[i])-want))
		}
		if maxErr > 1e-3 {
			t.Errorf("%d Hz → 16 kHz: max error %g on a 440 Hz tone", from, maxErr)
		}
	}
	// An 7 kHz tone at 44.1 kHz is above 16 kHz's pass band (7.52 kHz) only
	// partly; a 12 kHz one must be gone (aliasing suppressed).
	x := make([]float32, 44100)
	for i := range x {
		x[i] = float32(math.Sin(2 * math.Pi * 12000 * float64(i) / 44100))
	}
	y := Resample(x, 44100, SampleRate)
	var peak float64
	for i := 1000; i < len(y)-1000; i++ {
		peak = max(peak, math.Abs(float64(y[i])))
	}
	if peak > 1e-3 {
		t.Errorf("12 kHz tone leaks through at %g after resampling to 16 kHz", peak)
	}
	same := []float32{1, 2, 3}
	if r := Resample(same, 16000, 16000); len(r) != 3 || r[2] != 3 {
		t.Errorf("same rate changed the samples: %v", r)
	}
}

// TestMelFiltersMatchMLXWhisper compares the Go-computed filters with the
// mel_filters.npz mlx-whisper ships (librosa's, saved by OpenAI).
func TestMelFiltersMatchMLXWhisper(t *testing.T) {
	p := testenv.DataFile(t, filepath.Join("whisper-assets", "mel_filters.npz"))
	arrays, err := readNPZ(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{80, 128} {
		want := arrays[fmt.Sprintf("mel_%d", n)]
		got := MelFilters(n)
		if len(want) != len(got) {
			t.Fatalf("mel_%d: %d values, want %d", n, len(got), len(want))
		}
		diff := 0
		var maxAbs float64
		for i := range got {
			if got[i] != want[i] {
				diff++
				maxAbs = max(maxAbs, math.Abs(float64(got[i]-want[i])))
			}
		}
		if diff != 0 {
			t.Errorf("mel_%d: %d of %d values differ (max abs %g)", n, diff, len(got), maxAbs)
		}
	}
}

func TestRealClips(t *testing.T) {
	p := testenv.DataFile(t, filepath.Join("audio", "jfk.wav"))
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, c, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rate != 16000 || c.Channels != 1 || c.Format != "pcm16" || len(x) != 176000 {
		t.Fatalf("jfk.wav: %d Hz, %d channels, %s, %d samples", c.Rate, c.Channels, c.Format, len(x))
	}
}
