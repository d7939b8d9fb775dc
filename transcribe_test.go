package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// floatWAV writes 32-bit float WAVE_FORMAT_EXTENSIBLE with interleaved channels.
func floatWAV(rate, channels int, samples []float32) []byte {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(4 + 8 + 40 + 8 + 4*len(samples)))
	b.WriteString("WAVEfmt ")
	w(uint32(40))
	w(uint16(0xFFFE))
	w(uint16(channels))
	w(uint32(rate))
	w(uint32(rate * channels * 4))
	w(uint16(channels * 4))
	w(uint16(32))
	w(uint16(22))
	w(uint16(32))
	w(uint32(0))
	w(uint16(3)) // KSDATAFORMAT_SUBTYPE_IEEE_FLOAT
	b.Write([]byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71})
	b.WriteString("data")
	w(uint32(4 * len(samples)))
	for _, s := range samples {
		w(math.Float32bits(s))
	}
	return b.Bytes()
}

// TestTranscribeResampledStereo: jfk.wav as 44.1 kHz stereo float32 (the
// left channel the clip, the right the clip at 0.8: its mono mix is 0.9 of
// it) goes through the reader's downmix and resampler to the same words.
func TestTranscribeResampledStereo(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	model := filepath.Dir(testenv.DataFile(t, filepath.Join("whisper-tiny.en-ct2", "model.bin")))
	f, err := os.Open(testenv.DataFile(t, filepath.Join("audio", "jfk.wav")))
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := audio.Load(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	up := audio.Resample(x, audio.SampleRate, 44100)
	st := make([]float32, 2*len(up))
	for i, v := range up {
		st[2*i], st[2*i+1] = v, 0.8*v
	}
	path := filepath.Join(t.TempDir(), "jfk-44k-stereo.wav")
	if err := os.WriteFile(path, floatWAV(44100, 2, st), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := m.Run(context.Background(), []string{"transcribe", "-m", model, "--verbose", path}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "(44100 Hz, 2 channels, float32)") {
		t.Errorf("stderr %q does not describe the input", stderr.String())
	}
	words := strings.Fields(strings.ToLower(strings.NewReplacer(",", "", ".", "").Replace(stdout.String())))
	want := strings.Fields("and so my fellow americans ask not what your country can do for you ask what you can do for your country")
	if strings.Join(words, " ") != strings.Join(want, " ") {
		t.Errorf("transcript %q, want the words %q", stdout.String(), want)
	}
}

// TestTranscribeVAD: jfk.wav between 4 s and 3 s of silence, with --vad:
// Silero's speech spans alone are transcribed (--verbose says how much was
// kept), and the segment times are in the padded clip's clock: the first
// starts after the 4 s of silence, the last ends before the padding after.
func TestTranscribeVAD(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	model := filepath.Dir(testenv.DataFile(t, filepath.Join("whisper-tiny.en-ct2", "model.bin")))
	vad := testenv.DataFile(t, filepath.Join("silero", "silero_vad_v5.onnx"))
	f, err := os.Open(testenv.DataFile(t, filepath.Join("audio", "jfk.wav")))
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := audio.Load(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	padded := append(append(make([]float32, 4*audio.SampleRate), x...), make([]float32, 3*audio.SampleRate)...)
	path := filepath.Join(t.TempDir(), "jfk-padded.wav")
	if err := os.WriteFile(path, floatWAV(audio.SampleRate, 1, padded), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := m.Run(context.Background(), []string{"transcribe", "-m", model, "--vad", "--vad-model", vad, "--format", "verbose_json", "--verbose", path}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "mlxgo: vad: ") || !strings.Contains(stderr.String(), "of 18.00 s kept") {
		t.Errorf("stderr %q does not report the VAD", stderr.String())
	}
	var res struct {
		Duration float64 `json:"duration"`
		Text     string  `json:"text"`
		Segments []struct {
			Start, End float64
		} `json:"segments"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(res.Segments) == 0 || res.Duration != 18 {
		t.Fatalf("duration %v, %d segments: %s", res.Duration, len(res.Segments), stdout.String())
	}
	first, last := res.Segments[0], res.Segments[len(res.Segments)-1]
	if first.Start < 4 || first.Start > 5 || last.End > 15 || last.End < 13 {
		t.Errorf("segments from %.2f to %.2f s, want them inside the speech at 4-15 s", first.Start, last.End)
	}
	if !strings.Contains(strings.ToLower(res.Text), "ask not what your country can do for you") {
		t.Errorf("text %q", res.Text)
	}
}
