package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/silero"
	"github.com/mlxgo/mlxgo/models/whisper"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// tinyENTokenizer is tiny.en's tokenizer alone (no weights, no MLX): enough
// for the requests refused before any decoding.
func tinyENTokenizer(t *testing.T) *whisper.Tokenizer {
	t.Helper()
	dir := filepath.Dir(testenv.DataFile(t, "whisper-tiny.en-ct2/tokenizer.json"))
	tk, err := whisper.LoadTokenizer(dir, whisper.Dims{NVocab: 51864}, "", "transcribe")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// multipartBody builds a multipart/form-data body from name/value pairs;
// a "file" value is sent as a file part named audio.wav.
func multipartBody(t testing.TB, fields ...string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		var w io.Writer
		var err error
		if fields[i] == "file" {
			w, err = mw.CreateFormFile("file", "audio.wav")
		} else {
			w, err = mw.CreateFormField(fields[i])
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, fields[i+1])
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

func postRaw(t testing.TB, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// silentWAV is a valid 16 kHz mono 16-bit WAV of n zero samples.
func silentWAV(n int) string { return pcmWAV(make([]float32, n)) }

// pcmWAV is samples in [-1, 1) as a 16 kHz mono 16-bit WAV.
func pcmWAV(samples []float32) string {
	n := len(samples)
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1))
	w(uint16(1))
	w(uint32(16000))
	w(uint32(32000))
	w(uint16(2))
	w(uint16(16))
	b.WriteString("data")
	w(uint32(2 * n))
	for _, x := range samples {
		w(int16(math.Round(float64(x) * 32768)))
	}
	return b.String()
}

// TestAudioErrors: every request the audio endpoints refuse before any
// decoding gets OpenAI's error shape with the right status and the field
// at fault, and none reaches the model (it is nil here).
func TestAudioErrors(t *testing.T) {
	tr := &Transcriber{ID: "tiny.en", Tokenizer: tinyENTokenizer(t), MaxBytes: 64 << 10,
		Fingerprint: func() (string, error) { return "sha256:test", nil }}
	url, _ := startServer(t, Config{Transcriber: tr, APIKey: "k"})
	wav := silentWAV(1600)
	cases := []struct {
		name, path, ct string
		body           []byte
		fields         []string
		status         int
		param, has     string
	}{
		{name: "not multipart", ct: "application/json", body: []byte(`{"file":"x"}`), status: 400, param: "file", has: "multipart/form-data"},
		{name: "bad multipart", ct: "multipart/form-data; boundary=zzz", body: []byte("--zzz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc"), status: 400, param: "file", has: "cannot read the multipart body"},
		{name: "missing file", fields: []string{"model", "whisper-1"}, status: 400, param: "file", has: `"file" with the audio is required`},
		{name: "empty file", fields: []string{"file", ""}, status: 400, param: "file", has: "is empty"},
		{name: "unsupported format", fields: []string{"file", wav, "response_format", "tsv"}, status: 400, param: "response_format", has: "json, text, srt, verbose_json, vtt"},
		{name: "unknown granularity", fields: []string{"file", wav, "response_format", "verbose_json", "timestamp_granularities[]", "words"}, status: 400, param: "timestamp_granularities[]", has: "must be \"segment\" or \"word\""},
		{name: "granularities without verbose_json", fields: []string{"file", wav, "timestamp_granularities[]", "segment"}, status: 400, param: "timestamp_granularities[]", has: "verbose_json"},
		{name: "bad temperature", fields: []string{"file", wav, "temperature", "1.5"}, status: 400, param: "temperature", has: "from 0 to 1"},
		{name: "unknown field", fields: []string{"file", wav, "chunking_strategy", "auto"}, status: 400, param: "chunking_strategy", has: "unknown field"},
		{name: "field twice", fields: []string{"file", wav, "prompt", "a", "prompt", "b"}, status: 400, param: "prompt", has: "more than once"},
		{name: "stream", fields: []string{"file", wav, "stream", "true"}, status: 400, param: "stream", has: "answered whole"},
		{name: "other language on .en", fields: []string{"file", wav, "language", "de"}, status: 400, param: "language", has: "English-only"},
		{name: "not audio", fields: []string{"file", "ID3 this is an mp3"}, status: 400, param: "file", has: "ffmpeg"},
		{name: "truncated wav", fields: []string{"file", wav[:30]}, status: 400, param: "file", has: "cannot read the audio"},
		{name: "too large", fields: []string{"file", silentWAV(40000)}, status: 413, has: "larger than the limit of 65536 bytes"},
		{name: "translation on .en", path: "/v1/audio/translations", fields: []string{"file", wav}, status: 400, param: "model", has: "English-only: it cannot translate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := tc.ct, tc.body
			if tc.fields != nil {
				ct, body = multipartBody(t, tc.fields...)
			}
			path := tc.path
			if path == "" {
				path = "/v1/audio/transcriptions"
			}
			req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Authorization", "Bearer k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e errorBody
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("%d %s: not an OpenAI error (%v)", resp.StatusCode, b, err)
			}
			if resp.StatusCode != tc.status || !strings.Contains(e.Error.Message, tc.has) {
				t.Fatalf("status %d, message %q; want %d containing %q", resp.StatusCode, e.Error.Message, tc.status, tc.has)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Fatalf("param %v, want %q (%s)", e.Error.Param, tc.param, b)
			}
		})
	}
	// No API key: 401 before the body is read.
	ct, body := multipartBody(t, "file", wav)
	if status, b := postRaw(t, url+"/v1/audio/transcriptions", ct, body); status != 401 {
		t.Fatalf("without the key: %d %s", status, b)
	}
	// A server without --whisper-model: 404 naming the model.
	url2, _ := startServer(t, Config{})
	if status, b := postRaw(t, url2+"/v1/audio/transcriptions", ct, body); status != 404 || !strings.Contains(string(b), "--whisper-model") {
		t.Fatalf("without a whisper model: %d %s", status, b)
	}
}

var (
	tinyOnce sync.Once
	tinyTr   *Transcriber
	tinyErr  error
)

// tinyEN is the real tiny.en (CT2) as a Transcriber, loaded once.
func tinyEN(t *testing.T) *Transcriber {
	t.Helper()
	dir := filepath.Dir(testenv.DataFile(t, "whisper-tiny.en-ct2/model.bin"))
	mlxtest.Need(t)
	tinyOnce.Do(func() {
		var m *whisper.Model
		if tinyErr = mlx.Do(func() (err error) { m, err = whisper.Load(dir); return err }); tinyErr != nil {
			return
		}
		var tk *whisper.Tokenizer
		if tk, tinyErr = whisper.LoadTokenizer(dir, m.Dims, "", "transcribe"); tinyErr != nil {
			return
		}
		tinyTr = NewTranscriber(m, tk, dir, "whisper-tiny.en", "test")
	})
	if tinyErr != nil {
		t.Fatalf("cannot load tiny.en: %v", tinyErr)
	}
	return tinyTr
}

// jfkCut writes the first seconds of jfk.wav ("And so my fellow
// Americans") as a WAV file: a short clip keeps each request to a few
// decoding steps.
func jfkCut(t *testing.T, seconds float64) (string, []float32) {
	t.Helper()
	f, err := os.Open(testenv.DataFile(t, "audio/jfk.wav"))
	if err != nil {
		t.Fatal(err)
	}
	samples, _, err := audio.Load(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	samples = samples[:int(seconds*audio.SampleRate)]
	path := filepath.Join(t.TempDir(), "jfk-cut.wav")
	if err := os.WriteFile(path, []byte(pcmWAV(samples)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, samples
}

// directTranscript is what models/whisper gives for samples on its own,
// with mlx-whisper's defaults and the initial prompt given.
func directTranscript(t *testing.T, tr *Transcriber, samples []float32, prompt string) *whisper.Result {
	t.Helper()
	d, err := whisper.NewDecoder(tr.Model, tr.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	o := whisper.DefaultOptions()
	o.InitialPrompt = prompt
	var res *whisper.Result
	if err := mlx.Do(func() (err error) { res, err = d.Transcribe(context.Background(), samples, o); return err }); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAudioOpenAIClient runs server/testdata/openai_audio.py, the official
// openai client's audio.transcriptions.create on 4 s of jfk.wav against
// tiny.en: json, verbose_json and srt (with a prompt) must carry exactly
// what models/whisper gives for the clip alone (text, every segment field,
// subtitles), the model must be listed,
// and the client's errors must be the right exception types. A chat
// completion on the audio-only server is a 404 naming the model.
func TestAudioOpenAIClient(t *testing.T) {
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import openai").Run(); err != nil {
		testenv.Missing(t, "the openai package in .venv", "make venv")
	}
	tr := tinyEN(t)
	clip, samples := jfkCut(t, 4)
	url, _ := startServer(t, Config{APIKey: "test-key", Transcriber: tr,
		Model: Model{ID: tr.ID, Tokenizer: tr.Tokenizer.Text(), Runner: AudioOnlyRunner{ID: tr.ID}}})
	res := directTranscript(t, tr, samples, "")
	prompted := directTranscript(t, tr, samples, "Fellow citizens.")
	var srt bytes.Buffer
	if err := whisper.Write(&srt, "srt", "transcribe", prompted); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"clip": clip, "text": strings.TrimSpace(res.Text), "segments": res.Segments,
		"duration": res.Duration, "prompted_srt": srt.String()}
	ref := filepath.Join(t.TempDir(), "want.json")
	b, _ := json.Marshal(want)
	if err := os.WriteFile(ref, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_audio.py")
	cmd := exec.Command(py, script, url+"/v1", "test-key", ref)
	cmd.Env = append(os.Environ(), "OPENAI_LOG=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("openai client checks failed: %v", err)
	}
	if status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer test-key"); status != 404 || !strings.Contains(string(b), "speech-recognition model") {
		t.Fatalf("chat on the audio-only server: %d %s", status, b)
	}
}

// TestTranscriptionDuringGeneration: with --batch 1 a transcription is
// answered between the steps of a running generation, not after it, and
// its text is what models/whisper gives for the clip alone.
func TestTranscriptionDuringGeneration(t *testing.T) {
	tr := tinyEN(t)
	tk := testTokenizer(t)
	ids, _ := tk.Encode(strings.Repeat("word ", 3000), false)
	run := &scriptRunner{script: ids, delay: 20 * time.Millisecond}
	url, _ := startServer(t, Config{MaxTokens: 3000, Model: Model{Tokenizer: tk, Runner: serial(run), ContextLength: 8192}, Transcriber: tr})
	clip, samples := jfkCut(t, 4)
	want := strings.TrimSpace(directTranscript(t, tr, samples, "").Text)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	genDone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":3000}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		genDone <- err
	}()
	waitFor(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_decoding_rows 1") })
	wav, err := os.ReadFile(clip)
	if err != nil {
		t.Fatal(err)
	}
	ct, body := multipartBody(t, "file", string(wav), "response_format", "text")
	status, b := postRaw(t, url+"/v1/audio/transcriptions", ct, body)
	if status != 200 || string(b) != want+"\n" {
		t.Fatalf("transcription during a generation: %d %q, want %q", status, b, want)
	}
	select {
	case err := <-genDone:
		t.Fatalf("the generation (%v) ended before the transcription was answered", err)
	default:
	}
	cancel()
	<-genDone
}

// TestAudioVAD: with serve --vad-model, an upload of 4 s of jfk.wav between
// 3 s and 2 s of silence is cut to Silero's speech spans, and the segment
// times come back in the upload's clock.
func TestAudioVAD(t *testing.T) {
	base := tinyEN(t)
	vad, err := silero.Load(testenv.DataFile(t, "silero/silero_vad_v5.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	tr := *base
	tr.VAD = vad
	url, _ := startServer(t, Config{Transcriber: &tr})
	_, speech := jfkCut(t, 4)
	padded := append(append(make([]float32, 3*audio.SampleRate), speech...), make([]float32, 2*audio.SampleRate)...)
	ct, body := multipartBody(t, "file", pcmWAV(padded), "response_format", "verbose_json")
	status, b := postRaw(t, url+"/v1/audio/transcriptions", ct, body)
	var res struct {
		Text     string  `json:"text"`
		Duration float64 `json:"duration"`
		Segments []struct {
			Start, End float64
		} `json:"segments"`
		X struct {
			VAD string `json:"vad"`
		} `json:"x_mlxgo"`
	}
	if status != 200 || json.Unmarshal(b, &res) != nil || len(res.Segments) == 0 {
		t.Fatalf("%d %s", status, b)
	}
	if !strings.HasPrefix(res.X.VAD, "silero v5: ") || res.Duration != 9 {
		t.Errorf("x_mlxgo.vad %q, duration %v", res.X.VAD, res.Duration)
	}
	if s, e := res.Segments[0].Start, res.Segments[len(res.Segments)-1].End; s < 3 || e > 7.1 {
		t.Errorf("segments from %.2f to %.2f s, want them inside the speech at 3-7 s", s, e)
	}
	if !strings.Contains(strings.ToLower(res.Text), "and so my fellow american") {
		t.Errorf("text %q", res.Text)
	}
}

// TestAudioWordTimestamps: timestamp_granularities[]=word (verbose_json)
// answers each segment's words as models/whisper times them (the clip
// alone, WordTimestamps) and OpenAI's top-level words list, the same words
// stripped with the same times.
func TestAudioWordTimestamps(t *testing.T) {
	tr := tinyEN(t)
	url, _ := startServer(t, Config{Transcriber: tr})
	_, samples := jfkCut(t, 4)
	ct, body := multipartBody(t, "file", pcmWAV(samples), "response_format", "verbose_json", "timestamp_granularities[]", "segment", "timestamp_granularities[]", "word")
	status, b := postRaw(t, url+"/v1/audio/transcriptions", ct, body)
	var res struct {
		Segments []whisper.Segment `json:"segments"`
		Words    []struct {
			Word       string
			Start, End float64
		} `json:"words"`
	}
	if status != 200 || json.Unmarshal(b, &res) != nil {
		t.Fatalf("%d %s", status, b)
	}
	var want *whisper.Result
	if err := mlx.Do(func() error {
		d, err := whisper.NewDecoder(tr.Model, tr.Tokenizer)
		if err != nil {
			return err
		}
		o := whisper.DefaultOptions()
		o.WordTimestamps = true
		want, err = d.Transcribe(context.Background(), samples, o)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var flat []whisper.Word
	for _, s := range want.Segments {
		flat = append(flat, s.Words...)
	}
	if len(flat) == 0 || len(res.Words) != len(flat) || len(res.Segments) != len(want.Segments) {
		t.Fatalf("%d words (%d segments), models/whisper %d (%d): %s", len(res.Words), len(res.Segments), len(flat), len(want.Segments), b)
	}
	k := 0
	for i, s := range res.Segments {
		if len(s.Words) != len(want.Segments[i].Words) {
			t.Fatalf("segment %d: %d words, models/whisper %d", i, len(s.Words), len(want.Segments[i].Words))
		}
		for j, w := range s.Words {
			if w != want.Segments[i].Words[j] {
				t.Errorf("segment %d word %d: %+v, models/whisper %+v", i, j, w, want.Segments[i].Words[j])
			}
			if tw := res.Words[k]; tw.Word != strings.TrimSpace(w.Word) || tw.Start != w.Start || tw.End != w.End {
				t.Errorf("words[%d] %+v, segment word %+v", k, tw, w)
			}
			k++
		}
	}
}
