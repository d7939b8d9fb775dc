package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/silero"
	"github.com/mlxgo/mlxgo/models/whisper"
	"github.com/mlxgo/mlxgo/models/whisper/audio"
)

const transcribeUsage = `Usage: mlxgo transcribe -m DIR [flags] [AUDIO.wav | -]

Transcribes speech with Whisper and prints the transcript to stdout. AUDIO is
a WAV file (PCM 8/16/24/32-bit or float, any rate and channel count: mixed to
mono and resampled to 16 kHz), or any format ffmpeg reads when ffmpeg is on
PATH; "-" or no argument reads it from stdin. Audio
longer than 30 s is transcribed window by window, each window starting at the
last timestamp the previous one decoded, as mlx-whisper does.

DIR is a Whisper model directory: CTranslate2 (model.bin, config.json,
tokenizer.json, as faster-whisper loads) or mlx-whisper's layout (config.json,
weights.safetensors, with tokenizer.json beside it or given with --tokenizer).

Flags:
	-m DIR                         the model directory (required)
	--format FORMAT                text (one line per segment, default), json
	                               ({"text": ...}), verbose_json (segments with
	                               times, log-probabilities), srt, vtt, tsv
	--language CODE                the spoken language (multilingual models:
	                               default detected from the first 30 s, as
	                               mlx-whisper does; English-only models: en)
	--task transcribe|translate    translate to English (multilingual models)
	--prompt TEXT                  initial prompt: context for the first window
	--temperature T                first sampling temperature (default 0: greedy)
	--temperature-increment INC    on a failed window retry at T+INC, T+2·INC, …
	                               up to 1 (default 0.2; 0: no fallback)
	--beam-size N                  beam search with N beams at temperature 0
	                               (openai-whisper's BeamSearchDecoder; default 1:
	                               greedy); the sampled fallbacks stay sampling
	--patience P                   beam search goes on until round(N·P) sequences
	                               have finished (default 1; needs --beam-size)
	--best-of N                    at temperature > 0 sample N sequences per
	                               window and keep the best (default 1)
	--length-penalty A             rank beams and samples by logprob /
	                               ((5+length)/6)^A, A in 0..1 (default: by
	                               logprob / length)
	--compression-ratio-threshold X  a window whose text compresses better than
	                               X is a failure (default 2.4; 0: off)
	--logprob-threshold X          a window whose mean token log-probability is
	                               below X is a failure (default -1)
	--no-speech-threshold X        a window with <|nospeech|> above X and a low
	                               log-probability is silence (default 0.6)
	--no-condition-on-previous-text  do not prompt each window with the text
	                               before it
	--no-timestamps                decode text only (one segment per window)
	--word-timestamps              time every word (cross-attention alignment
	                               heads and DTW, as mlx-whisper): json and
	                               verbose_json segments get "words", srt/vtt
	                               cues span each segment's words
	--vad                          transcribe only the speech that Silero VAD v5
	                               finds (get_speech_timestamps' defaults), the
	                               segment times still in the original clock
	--vad-model FILE               silero_vad_v5.onnx (npm @ricky0123/vad-web's
	                               dist/; default $MLXGO_VAD_MODEL)
	--fp32                         float32 activations (mlx-whisper's fp16=False;
	                               the weights stay as stored); default: the
	                               weights' dtype, float16 for tiny.en
	--seed N                       seed for sampling at temperature > 0: the
	                               draws of mlx-whisper after mx.random.seed(N)
	                               (default 0)
	--tokenizer PATH               tokenizer.json, when it is not in DIR
	--verbose                      print audio length, load time, transcription
	                               time and real-time factor to stderr
` + runtimeUsage + `
Example:
	$ mlxgo transcribe -m ./whisper-tiny.en jfk.wav
	And so my fellow Americans ask not what your country can do for you
	ask what you can do for your country
	$ sox speech.flac -t wav - | mlxgo transcribe -m ./whisper-tiny.en --format srt -
`

type transcribeCommand struct{ m *Main }

type transcribeFlags struct {
	model, format, language, task, prompt, tokenizer, input string
	vadModel                                                string
	temperature, increment, patience                        float64
	lengthPenalty                                           float64
	beamSize, bestOf                                        int
	patienceSet, lengthPenaltySet                           bool
	crThreshold, lpThreshold, nsThreshold                   float64
	noCondition, noTimestamps, verbose, tempSet, fp32, vad  bool
	wordTimestamps                                          bool
	seed                                                    uint64
	rt                                                      runtimeFlags
}

func (c *transcribeCommand) parse(args []string) (*transcribeFlags, error) {
	fs := c.m.newFlagSet("transcribe", transcribeUsage)
	f := &transcribeFlags{}
	fs.StringVar(&f.model, "m", "", "")
	fs.StringVar(&f.format, "format", "text", "")
	fs.StringVar(&f.language, "language", "", "")
	fs.StringVar(&f.task, "task", "transcribe", "")
	fs.StringVar(&f.prompt, "prompt", "", "")
	fs.StringVar(&f.tokenizer, "tokenizer", "", "")
	fs.Float64Var(&f.temperature, "temperature", 0, "")
	fs.Float64Var(&f.increment, "temperature-increment", 0.2, "")
	fs.IntVar(&f.beamSize, "beam-size", 1, "")
	fs.Float64Var(&f.patience, "patience", 1, "")
	fs.IntVar(&f.bestOf, "best-of", 1, "")
	fs.Float64Var(&f.lengthPenalty, "length-penalty", 0, "")
	fs.Float64Var(&f.crThreshold, "compression-ratio-threshold", 2.4, "")
	fs.Float64Var(&f.lpThreshold, "logprob-threshold", -1, "")
	fs.Float64Var(&f.nsThreshold, "no-speech-threshold", 0.6, "")
	fs.BoolVar(&f.noCondition, "no-condition-on-previous-text", false, "")
	fs.BoolVar(&f.noTimestamps, "no-timestamps", false, "")
	fs.BoolVar(&f.wordTimestamps, "word-timestamps", false, "")
	fs.Uint64Var(&f.seed, "seed", 0, "")
	fs.BoolVar(&f.verbose, "verbose", false, "")
	fs.BoolVar(&f.fp32, "fp32", false, "")
	fs.BoolVar(&f.vad, "vad", false, "")
	fs.StringVar(&f.vadModel, "vad-model", os.Getenv("MLXGO_VAD_MODEL"), "")
	f.rt.register(fs)
	// Flags may follow the audio argument (mlxgo transcribe a.wav -m DIR).
	var rest []string
	for {
		if err := c.m.parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if err := f.rt.resolve(os.Getenv); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "temperature", "temperature-increment":
			f.tempSet = true
		case "patience":
			f.patienceSet = true
		case "length-penalty":
			f.lengthPenaltySet = true
		}
	})
	temps := f.temperatures()
	switch {
	case len(rest) > 1:
		return nil, usagef("unexpected argument %q (one audio file at a time)", rest[1])
	case f.model == "":
		return nil, usagef("-m DIR is required")
	case !slices.Contains(whisper.Formats, f.format):
		return nil, usagef("--format %q: want one of %s", f.format, strings.Join(whisper.Formats, ", "))
	case f.task != "transcribe" && f.task != "translate":
		return nil, usagef("--task %q: want transcribe or translate", f.task)
	case !(f.temperature >= 0 && f.temperature <= 1):
		return nil, usagef("--temperature %v: want 0 to 1", f.temperature)
	case !(f.increment >= 0 && f.increment <= 1):
		return nil, usagef("--temperature-increment %v: want 0 to 1", f.increment)
	case f.beamSize < 1:
		return nil, usagef("--beam-size %d: want 1 (greedy) or more", f.beamSize)
	case !(f.patience > 0):
		return nil, usagef("--patience %v: want more than 0", f.patience)
	case f.patienceSet && f.beamSize < 2:
		return nil, usagef("--patience needs --beam-size 2 or more (beam search)")
	case f.beamSize > 1 && temps[0] > 0:
		return nil, usagef("--beam-size %d with --temperature %v: beam search runs at temperature 0 only, and no decoding here is at 0", f.beamSize, f.temperature)
	case f.bestOf < 1:
		return nil, usagef("--best-of %d: want 1 or more", f.bestOf)
	case f.bestOf > 1 && slices.Max(temps) == 0:
		return nil, usagef("--best-of %d with greedy decoding only: best-of samples at temperature > 0, and no decoding here is (--temperature 0 --temperature-increment 0)", f.bestOf)
	case f.lengthPenaltySet && !(f.lengthPenalty >= 0 && f.lengthPenalty <= 1):
		return nil, usagef("--length-penalty %v: want 0 to 1", f.lengthPenalty)
	case math.IsNaN(f.crThreshold) || f.crThreshold < 0:
		return nil, usagef("--compression-ratio-threshold %v: want 0 (off) or more", f.crThreshold)
	case f.vad && f.vadModel == "":
		return nil, usagef("--vad needs the Silero VAD v5 ONNX file: --vad-model FILE or $MLXGO_VAD_MODEL (npm @ricky0123/vad-web, dist/silero_vad_v5.onnx)")
	}
	if len(rest) == 1 {
		f.input = rest[0]
	}
	return f, nil
}

// temperatures is the fallback schedule: mlx-whisper's default tuple, or
// np.arange(T, 1 + 1e-6, INC) as its command line builds it.
func (f *transcribeFlags) temperatures() []float64 {
	if !f.tempSet {
		return whisper.DefaultOptions().Temperatures
	}
	return whisper.Temperatures(f.temperature, f.increment)
}

// readAudio reads the whole input, a named file or stdin: WAV natively,
// anything else through ffmpeg when it is on PATH (as mlx-whisper reads all
// audio), else an error naming the format problem.
func (c *transcribeCommand) readAudio(ctx context.Context, f *transcribeFlags) ([]float32, *audio.Clip, string, error) {
	name, path := f.input, f.input
	var data []byte
	var err error
	if name == "" || name == "-" {
		name, path = "stdin", ""
		data, err = io.ReadAll(c.m.Stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, nil, "", err
	}
	x, clip, err := audio.Load(bytes.NewReader(data))
	if errors.Is(err, audio.ErrNotWAV) && len(data) > 0 {
		var ferr error
		x, clip, ferr = audio.DecodeFFmpeg(ctx, path, data)
		switch {
		case ferr == nil:
			err = nil
		case errors.Is(ferr, audio.ErrNoFFmpeg):
			err = fmt.Errorf("%w (only WAV is read natively; other formats need ffmpeg on PATH, or convert with ffmpeg -i IN -ar 16000 -ac 1 -f wav -)", err)
		default:
			err = ferr
		}
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("cannot read audio from %s: %w", name, err)
	}
	if len(x) == 0 {
		return nil, nil, "", fmt.Errorf("cannot transcribe %s: it holds no samples", name)
	}
	return x, clip, name, nil
}

func (c *transcribeCommand) Run(ctx context.Context, args []string) error {
	f, err := c.parse(args)
	if err != nil {
		return err
	}
	if st, err := os.Stat(f.model); err != nil {
		return fmt.Errorf("cannot load whisper model: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("cannot load whisper model: %s is not a directory", f.model)
	}
	samples, clip, name, err := c.readAudio(ctx, f)
	if err != nil {
		return err
	}
	var speech *silero.Speech
	run := samples
	var vadTime time.Duration
	if f.vad {
		t0 := time.Now()
		vm, err := silero.Load(f.vadModel)
		if err != nil {
			return err
		}
		speech = silero.Cut(samples, silero.SpeechTimestamps(vm.Probs(samples), len(samples), silero.DefaultParams()))
		run, vadTime = speech.Samples, time.Since(t0)
	}
	if err := loadMLX(ctx, &f.rt); err != nil {
		return err
	}
	tokPath := f.tokenizer
	if tokPath == "" {
		tokPath = filepath.Join(f.model, "tokenizer.json")
	}
	o := whisper.DefaultOptions()
	o.Temperatures = f.temperatures()
	o.CompressionRatioThreshold = f.crThreshold
	o.LogprobThreshold = f.lpThreshold
	o.NoSpeechThreshold = f.nsThreshold
	o.NoConditionOnPreviousText = f.noCondition
	o.InitialPrompt = f.prompt
	o.WithoutTimestamps = f.noTimestamps
	o.WordTimestamps = f.wordTimestamps
	o.Seed = f.seed
	o.BeamSize, o.BestOf = f.beamSize, f.bestOf
	if f.beamSize > 1 {
		o.Patience = f.patience
	}
	if f.lengthPenaltySet {
		o.LengthPenalty = &f.lengthPenalty
	}
	o.DetectLanguage = f.language == ""
	var res *whisper.Result
	var loadTime, runTime time.Duration
	err = mlx.Do(func() error {
		t0 := time.Now()
		m, err := whisper.Load(f.model)
		if err != nil {
			return fmt.Errorf("cannot load whisper model: %w", err)
		}
		defer m.Close()
		if f.fp32 {
			if err := m.SetActivation(mlx.Float32); err != nil {
				return err
			}
		}
		tk, err := whisper.LoadTokenizer(tokPath, m.Dims, f.language, f.task)
		if err != nil {
			return err
		}
		d, err := whisper.NewDecoder(m, tk)
		if err != nil {
			return err
		}
		loadTime = time.Since(t0)
		t1 := time.Now()
		if len(run) == 0 {
			// VAD found no speech: nothing to decode.
			res = &whisper.Result{Language: tk.Language, Segments: []whisper.Segment{}}
		} else {
			res, err = d.Transcribe(ctx, run, o)
		}
		runTime = time.Since(t1)
		return err
	})
	if err != nil {
		return err
	}
	if speech != nil {
		restoreClock(res, speech, float64(len(samples))/audio.SampleRate)
		if f.verbose {
			fmt.Fprintf(c.m.Stderr, "mlxgo: vad: %d speech segments, %.2f of %.2f s kept, in %.2f s\n", len(speech.Spans),
				float64(len(run))/audio.SampleRate, float64(len(samples))/audio.SampleRate, vadTime.Seconds())
		}
	}
	if f.verbose && res.Detected != nil {
		fmt.Fprintf(c.m.Stderr, "mlxgo: detected language: %s (p %.4f)\n", whisper.LanguageName(res.Language), res.Detected.Probs[slices.Index(whisper.Languages, res.Language)])
	}
	if f.verbose {
		secs := float64(len(run)) / audio.SampleRate
		fmt.Fprintf(c.m.Stderr, "mlxgo: audio %s: %.2f s (%d Hz, %d channels, %s), model load %.2f s\n",
			name, clip.Duration(), clip.Rate, clip.Channels, clip.Format, loadTime.Seconds())
		fmt.Fprintf(c.m.Stderr, "mlxgo: transcribed %.2f s of audio in %.2f s (real-time factor %.3f, %.1fx real time), %d windows, %d fallbacks, %d segments\n",
			secs, runTime.Seconds(), runTime.Seconds()/secs, secs/runTime.Seconds(), res.Windows, res.Fallbacks, len(res.Segments))
	}
	return whisper.Write(c.m.Stdout, f.format, f.task, res)
}

// restoreClock moves segment times from the speech-only audio Whisper saw
// back to the original clip's (faster-whisper's restore_speech_timestamps).
func restoreClock(res *whisper.Result, speech *silero.Speech, duration float64) {
	for i := range res.Segments {
		s := &res.Segments[i]
		s.Start = math.Round(speech.Original(s.Start, false)*1000) / 1000
		s.End = math.Round(speech.Original(s.End, true)*1000) / 1000
		for k := range s.Words {
			w := &s.Words[k]
			w.Start = math.Round(speech.Original(w.Start, false)*1000) / 1000
			w.End = math.Round(speech.Original(w.End, true)*1000) / 1000
		}
	}
	res.Duration = duration
}
