package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/silero"
	"github.com/mlxgo/mlxgo/models/whisper"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

// maxAudioBytes is OpenAI's upload limit for /v1/audio (25 MB), the default
// body limit of those endpoints: the JSON endpoints' 4 MiB holds barely two
// minutes of 16 kHz 16-bit WAV.
const maxAudioBytes = 25 << 20

// Transcriber is the Whisper model behind POST /v1/audio/transcriptions and
// /v1/audio/translations.
type Transcriber struct {
	ID    string // the name /v1/models lists
	Model *whisper.Model
	// Tokenizer is the model's, with the default start sequence; each
	// request gets its own copy for its language and task.
	Tokenizer *whisper.Tokenizer
	// MaxBytes is the request body limit (0: 25 MiB, OpenAI's).
	MaxBytes    int64
	Fingerprint func() (string, error)
	Composition Composition
	// VAD, when set, cuts each upload to the speech Silero VAD finds
	// (get_speech_timestamps' defaults); times stay in the upload's clock.
	VAD *silero.Model
}

// NewTranscriber describes a Whisper model loaded from dir for the server;
// runtime names mlxgo's version.
func NewTranscriber(m *whisper.Model, t *whisper.Tokenizer, dir, id, runtime string) *Transcriber {
	art := &models.Artifact{Files: whisperFiles(dir)}
	return &Transcriber{
		ID: id, Model: m, Tokenizer: t, Fingerprint: sync.OnceValues(art.Fingerprint),
		Composition: Composition{
			ModelRuntime: fmt.Sprintf("%s, %s", runtime, mlx.RuntimeDescription()),
			WeightScheme: fmt.Sprintf("whisper %d layers × %d, weights %s, activations %s", m.Dims.NAudioLayer, m.Dims.NAudioState, m.Dtype, m.Activation),
			KVScheme:     "whisper self-attention cache per window, cross-attention keys once per window",
			FidelityContract: "L1: encoder output and decoder logits bit-identical to mlx-whisper 0.4.3's transcribe() on the same libmlx " +
				"(models/whisper TestL1AgainstMLXWhisper)",
		},
	}
}

// modelEntry is the model's item of /v1/models.
func (t *Transcriber) modelEntry(created int64) map[string]any {
	fp, _ := t.Fingerprint()
	endpoints := []string{"/v1/audio/transcriptions"}
	if t.Tokenizer.Multilingual() {
		endpoints = append(endpoints, "/v1/audio/translations")
	}
	return map[string]any{
		"id": t.ID, "object": "model", "created": created, "owned_by": "mlxgo",
		"x_mlxgo": map[string]any{"artifact_fingerprint": fp, "endpoints": endpoints, "multilingual": t.Tokenizer.Multilingual()},
	}
}

// whisperFiles is every file of a Whisper directory that decides the text.
func whisperFiles(dir string) []string {
	var files []string
	for _, name := range []string{"config.json", "model.bin", "weights.safetensors", "weights.npz", "tokenizer.json", "vocabulary.txt", "vocabulary.json"} {
		f := filepath.Join(dir, name)
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	return files
}

// NotChatModelAudio is NotChatModel for a server whose only model is a
// Whisper model.
func NotChatModelAudio(id string) error {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_supported",
		message: fmt.Sprintf("model %s is a speech-recognition model: it serves only /v1/audio/transcriptions", id)}
}

// AudioOnlyRunner is the Runner of a server started with a Whisper model
// alone: every completion execution is refused with NotChatModelAudio.
// Transcriptions are tasks of the engine and need no row.
type AudioOnlyRunner struct{ ID string }

// MaxRows implements Runner: one, never used.
func (r AudioOnlyRunner) MaxRows() int { return 1 }

// Add implements Runner: it refuses every completion.
func (r AudioOnlyRunner) Add(context.Context, []int32, gen.Options, *uint64, func(int32) error, func(Result, error)) error {
	return NotChatModelAudio(r.ID)
}

// Step, Rows, Decoding and Abort implement Runner: there are never rows.
func (AudioOnlyRunner) Step() error   { return nil }
func (AudioOnlyRunner) Rows() int     { return 0 }
func (AudioOnlyRunner) Decoding() int { return 0 }
func (AudioOnlyRunner) Abort(error)   {}

// audioFormats are OpenAI's response_format values for whisper-1.
var audioFormats = []string{"json", "text", "srt", "verbose_json", "vtt"}

// audioRequest is a validated multipart /v1/audio body.
type audioRequest struct {
	file        []byte
	filename    string
	model       string
	language    string
	prompt      string
	format      string
	temperature *float64
	words       bool // timestamp_granularities[] holds "word"
}

// decodeAudioRequest reads the multipart body: OpenAI's fields, each at
// most once; an unknown field or a word timestamp granularity is a 400
// rather than silently ignored. translate drops language (OpenAI's
// translations take none).
func decodeAudioRequest(r *http.Request, translate bool) (*audioRequest, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		return nil, invalidf("file", "the request must be multipart/form-data with the audio in the field \"file\" (Content-Type is %q)", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	req := &audioRequest{format: "json"}
	seen := map[string]bool{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, multipartError(err)
		}
		name := p.FormName()
		if name == "" {
			return nil, invalidf("", "a multipart part has no form field name")
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, multipartError(err)
		}
		if name != "timestamp_granularities[]" && seen[name] {
			return nil, invalidf(name, "the field %q is given more than once", name)
		}
		seen[name] = true
		val := string(data)
		switch name {
		case "file":
			req.file, req.filename = data, p.FileName()
		case "model":
			req.model = val
		case "language":
			if translate {
				return nil, unsupported("language", "translations take no language (OpenAI's API): the spoken language is detected from the first 30 s")
			}
			req.language = val
		case "prompt":
			req.prompt = val
		case "response_format":
			req.format = val
		case "temperature":
			t, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil || !(t >= 0 && t <= 1) {
				return nil, invalidf("temperature", "temperature must be a number from 0 to 1, not %q", val)
			}
			req.temperature = &t
		case "timestamp_granularities[]", "timestamp_granularities":
			switch val {
			case "segment":
			case "word":
				req.words = true
			default:
				return nil, invalidf("timestamp_granularities[]", "timestamp_granularities[] must be \"segment\" or \"word\", not %q", val)
			}
		case "stream":
			if b, _ := strconv.ParseBool(val); b {
				return nil, unsupported("stream", "transcriptions are answered whole")
			}
		default:
			return nil, invalidf(name, "unknown field %q: the audio endpoints take file, model, language, prompt, response_format, temperature and timestamp_granularities[]", name)
		}
	}
	switch {
	case !seen["file"]:
		return nil, invalidf("file", "the field \"file\" with the audio is required")
	case len(req.file) == 0:
		return nil, invalidf("file", "the uploaded file %q is empty", req.filename)
	}
	if !slices.Contains(audioFormats, req.format) {
		return nil, invalidf("response_format", "response_format must be one of %s, not %q", strings.Join(audioFormats, ", "), req.format)
	}
	if seen["timestamp_granularities[]"] && req.format != "verbose_json" {
		return nil, invalidf("timestamp_granularities[]", "timestamp_granularities[] needs response_format verbose_json")
	}
	return req, nil
}

// multipartError keeps the body limit's 413 and makes the rest a 400.
func multipartError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return invalidf("file", "cannot read the multipart body: %v", err)
}

// transcribeTask is one /v1/audio request as a job of the engine: the
// log-mel on its first step, then one 30-second window per step, so that
// chat rows keep decoding between windows.
type transcribeTask struct {
	d       *whisper.Decoder
	samples []float32
	o       whisper.Options
	run     *whisper.Run
	res     *whisper.Result
	elapsed time.Duration
}

// step implements task.
func (t *transcribeTask) step(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil && t.run == nil {
		return true, err
	}
	t0 := time.Now()
	defer func() { t.elapsed += time.Since(t0) }()
	var done bool
	err := mlx.Do(func() error {
		if t.run == nil {
			var err error
			t.run, err = t.d.Start(t.samples, t.o)
			return err
		}
		var err error // Step frees the run's state when it ends it
		if done, err = t.run.Step(ctx); err == nil && done {
			t.res = t.run.Result()
		}
		return err
	})
	return done || err != nil, err
}

// audioComposition is x_mlxgo for a transcription.
type audioComposition struct {
	Composition
	Task          string  `json:"task"`
	Language      string  `json:"language"`
	Temperatures  string  `json:"temperatures"`
	Windows       int     `json:"windows"`
	Fallbacks     int     `json:"fallbacks"`
	AudioSeconds  float64 `json:"audio_seconds"`
	RealTimeRatio float64 `json:"real_time_factor"`
	VAD           string  `json:"vad"`
}

func (s *Server) handleTranscriptions(w http.ResponseWriter, r *http.Request) {
	s.handleAudio(w, r, false)
}
func (s *Server) handleTranslations(w http.ResponseWriter, r *http.Request) {
	s.handleAudio(w, r, true)
}

func (s *Server) handleAudio(w http.ResponseWriter, r *http.Request, translate bool) {
	tr := s.cfg.Transcriber
	if tr == nil {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_supported",
			message: fmt.Sprintf("model %s is not a speech-recognition model: start mlxgo serve with --whisper-model DIR to serve /v1/audio", s.cfg.Model.ID)})
		return
	}
	task := "transcribe"
	if translate {
		task = "translate"
		if !tr.Tokenizer.Multilingual() {
			writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "model", code: "model_not_supported",
				message: fmt.Sprintf("model %s is English-only: it cannot translate (use /v1/audio/transcriptions)", tr.ID)})
			return
		}
	}
	limit := tr.MaxBytes
	if limit <= 0 {
		limit = maxAudioBytes
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	req, err := decodeAudioRequest(r, translate)
	if err != nil {
		writeError(w, err)
		return
	}
	tk, err := tr.Tokenizer.WithTask(req.language, task)
	if err != nil {
		writeError(w, invalidf("language", "%s", strings.Replace(err.Error(), "--language", "language", 1)))
		return
	}
	samples, err := decodeUpload(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := whisper.NewDecoder(tr.Model, tk)
	if err != nil {
		writeError(w, err)
		return
	}
	o := whisper.DefaultOptions()
	if req.temperature != nil {
		// OpenAI: "if set to 0, the model will use log probability to
		// automatically increase the temperature": fallback from T by 0.2.
		o.Temperatures = whisper.Temperatures(*req.temperature, 0.2)
	}
	o.InitialPrompt = req.prompt
	// No language on a multilingual model: detect_language on the first
	// 30 s, as mlx-whisper's transcribe() does (translations always).
	o.DetectLanguage = req.language == ""
	o.WordTimestamps = req.words
	ctx := r.Context()
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	vad := "off"
	run := samples
	var speech *silero.Speech
	if tr.VAD != nil {
		speech = silero.Cut(samples, silero.SpeechTimestamps(tr.VAD.Probs(samples), len(samples), silero.DefaultParams()))
		run = speech.Samples
		vad = fmt.Sprintf("silero v5: %d speech spans, %.2f of %.2f s kept", len(speech.Spans),
			float64(len(run))/audio.SampleRate, float64(len(samples))/audio.SampleRate)
	}
	tt := &transcribeTask{d: d, samples: run, o: o}
	j := &job{ctx: ctx, task: tt, events: make(chan event, 1), queued: time.Now(), m: s.m}
	if len(run) > 0 {
		if err := s.eng.submit(j); err != nil {
			writeError(w, err)
			return
		}
		for ev := j.next(); ; ev = j.next() {
			if ev.done {
				err = ev.err
				break
			}
		}
	} else {
		// VAD found no speech: nothing to decode.
		tt.res = &whisper.Result{Language: tk.Language, Segments: []whisper.Segment{}}
	}
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() == nil {
			err = errTimeout
		}
		writeError(w, err)
		return
	}
	res := tt.res
	if speech != nil {
		for i := range res.Segments {
			sg := &res.Segments[i]
			sg.Start = math.Round(speech.Original(sg.Start, false)*1000) / 1000
			sg.End = math.Round(speech.Original(sg.End, true)*1000) / 1000
			for k := range sg.Words {
				w := &sg.Words[k]
				w.Start = math.Round(speech.Original(w.Start, false)*1000) / 1000
				w.End = math.Round(speech.Original(w.End, true)*1000) / 1000
			}
		}
	}
	res.Duration = float64(len(samples)) / audio.SampleRate
	c := tr.Composition
	c.ArtifactFingerprint, _ = tr.Fingerprint()
	c.Scheduling, c.BatchRows = SchedulingSerial, 1
	c.Sampling = fmt.Sprintf("greedy at temperature 0, else categorical (seed %d); fallback on compression ratio > %g or avg logprob < %g unless no_speech_prob > %g",
		o.Seed, o.CompressionRatioThreshold, o.LogprobThreshold, o.NoSpeechThreshold)
	x := audioComposition{Composition: c, Task: task, Language: res.Language, Temperatures: fmt.Sprint(o.Temperatures),
		Windows: res.Windows, Fallbacks: res.Fallbacks, AudioSeconds: res.Duration, VAD: vad}
	if res.Duration > 0 {
		x.RealTimeRatio = math.Round(tt.elapsed.Seconds()/res.Duration*1e4) / 1e4
	}
	text := strings.TrimSpace(res.Text)
	switch req.format {
	case "json":
		writeJSON(w, http.StatusOK, map[string]any{"text": text, "x_mlxgo": x})
	case "verbose_json":
		body := map[string]any{"task": task, "language": whisper.LanguageName(res.Language), "duration": res.Duration,
			"text": text, "segments": res.Segments, "x_mlxgo": x}
		if req.words {
			// OpenAI's verbose_json with word granularity: a top-level
			// "words" list of {word, start, end} (the segments keep theirs).
			words := []map[string]any{}
			for _, sg := range res.Segments {
				for _, wd := range sg.Words {
					words = append(words, map[string]any{"word": strings.TrimSpace(wd.Word), "start": wd.Start, "end": wd.End})
				}
			}
			body["words"] = words
		}
		writeJSON(w, http.StatusOK, body)
	case "text":
		writeText(w, text+"\n")
	default: // srt, vtt
		var b bytes.Buffer
		if err := whisper.Write(&b, req.format, task, res); err != nil {
			writeError(w, err)
			return
		}
		writeText(w, b.String())
	}
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, s)
}

// decodeUpload reads the uploaded audio: WAV natively, other formats
// through ffmpeg when it is on PATH; anything else is a 400 naming why.
func decodeUpload(ctx context.Context, req *audioRequest) ([]float32, error) {
	x, _, err := audio.Load(bytes.NewReader(req.file))
	if errors.Is(err, audio.ErrNotWAV) {
		var ferr error
		x, _, ferr = audio.DecodeFFmpeg(ctx, "", req.file)
		switch {
		case ferr == nil:
			err = nil
		case errors.Is(ferr, audio.ErrNoFFmpeg):
			err = fmt.Errorf("%w (only WAV is read natively; other formats need ffmpeg on the server's PATH)", err)
		default:
			err = ferr
		}
	}
	if err != nil {
		e := invalidf("file", "cannot read the audio in %q: %v", req.filename, err)
		e.code = "invalid_audio"
		return nil, e
	}
	if len(x) == 0 {
		return nil, invalidf("file", "the audio in %q holds no samples", req.filename)
	}
	return x, nil
}
