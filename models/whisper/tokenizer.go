package whisper

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/tok"
)

// Languages are Whisper's language codes in token order (openai-whisper's
// and mlx-whisper's LANGUAGES).
var Languages = strings.Fields(`en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms
cs ro da hu ta no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq
sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt
haw ln ha ba jw su yue`)

// Tokenizer is Whisper's BPE (tokenizer.json, byte-level GPT-2) with the
// special tokens mlx-whisper's Tokenizer names. Their ids follow the layout
// OpenAI's tiktoken files give them: <|endoftext|>, <|startoftranscript|>,
// the languages, <|translate|>, <|transcribe|>, <|startoflm|>,
// <|startofprev|>, <|nospeech|>, <|notimestamps|>, then the timestamps
// <|0.00|>… (tokenizer.json files of .en models call <|nospeech|>
// <|nocaptions|>, and often leave the timestamps out: ids count, not names).
type Tokenizer struct {
	bpe *tok.Tokenizer

	EOT, SOT, Translate, Transcribe, SOTLM, SOTPrev, NoSpeech, NoTimestamps, TimestampBegin int32
	NumLanguages                                                                            int
	// SOTSequence is <|startoftranscript|>, then the language and task tokens
	// on multilingual models (mlx-whisper's sot_sequence).
	SOTSequence []int32
	Language    string
	Task        string // "transcribe" or "translate"

	multilingual bool
}

// LoadTokenizer reads tokenizer.json from dir (or the file path given) for a
// model of dims; language and task set the start sequence on multilingual
// models (language "" means "en" here: detection is the caller's).
func LoadTokenizer(path string, d Dims, language, task string) (*Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	bpe, err := tok.Load(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load the whisper tokenizer: %w", err)
	}
	eot, ok := bpe.TokenToID("<|endoftext|>")
	if !ok {
		return nil, fmt.Errorf("%s has no <|endoftext|> token: not a Whisper tokenizer", path)
	}
	sot, ok := bpe.TokenToID("<|startoftranscript|>")
	if !ok || sot != eot+1 {
		return nil, fmt.Errorf("%s: <|startoftranscript|> is not right after <|endoftext|>: not a Whisper tokenizer", path)
	}
	n := d.NumLanguages()
	t := &Tokenizer{bpe: bpe, EOT: eot, SOT: sot, NumLanguages: n}
	base := sot + 1 + int32(n)
	t.Translate, t.Transcribe, t.SOTLM, t.SOTPrev = base, base+1, base+2, base+3
	t.NoSpeech, t.NoTimestamps, t.TimestampBegin = base+4, base+5, base+6
	if id, ok := bpe.TokenToID("<|notimestamps|>"); !ok || id != t.NoTimestamps {
		return nil, fmt.Errorf("%s: <|notimestamps|> is %d, want %d for a model of %d tokens", path, id, t.NoTimestamps, d.NVocab)
	}
	if int(t.TimestampBegin)+1501 != d.NVocab {
		return nil, fmt.Errorf("%s: timestamps from %d leave %d tokens of %d, want 1501", path, t.TimestampBegin, d.NVocab-int(t.TimestampBegin), d.NVocab)
	}
	t.multilingual = d.Multilingual()
	return t.WithTask(language, task)
}

// WithTask is t with the start sequence of language and task (multilingual
// models; "" is "en" and "transcribe"); it shares t's vocabulary.
func (t *Tokenizer) WithTask(language, task string) (*Tokenizer, error) {
	c := *t
	c.SOTSequence = []int32{t.SOT}
	c.Task = "transcribe"
	if t.multilingual {
		if language == "" {
			language = "en"
		}
		n := t.NumLanguages
		i := slices.Index(Languages[:min(n, len(Languages))], language)
		if i < 0 {
			return nil, fmt.Errorf("unknown language %q (want one of %s)", language, strings.Join(Languages[:min(n, len(Languages))], " "))
		}
		c.Language = language
		switch task {
		case "transcribe", "":
			c.SOTSequence = append(c.SOTSequence, t.SOT+1+int32(i), t.Transcribe)
		case "translate":
			c.SOTSequence = append(c.SOTSequence, t.SOT+1+int32(i), t.Translate)
			c.Task = "translate"
		default:
			return nil, fmt.Errorf("unknown task %q (transcribe or translate)", task)
		}
	} else {
		if language != "" && language != "en" {
			return nil, fmt.Errorf("this model is English-only: --language %q is not possible", language)
		}
		if task == "translate" {
			return nil, fmt.Errorf("this model is English-only: it cannot translate")
		}
		c.Language = "en"
	}
	return &c, nil
}

// LanguageTokens is mlx-whisper's all_language_tokens: the ids of the
// model's languages, in Languages' order.
func (t *Tokenizer) LanguageTokens() []int32 {
	if !t.multilingual {
		return nil
	}
	out := make([]int32, min(t.NumLanguages, len(Languages)))
	for i := range out {
		out[i] = t.SOT + 1 + int32(i)
	}
	return out
}

// Multilingual reports whether the vocabulary has language tokens (and so
// can translate).
func (t *Tokenizer) Multilingual() bool { return t.multilingual }

// Text is the underlying BPE tokenizer.
func (t *Tokenizer) Text() *tok.Tokenizer { return t.bpe }

// Encode tokenizes text with no special tokens.
func (t *Tokenizer) Encode(text string) ([]int32, error) { return t.bpe.Encode(text, false) }

// Decode is mlx-whisper's decode: tokens from the timestamps on are dropped.
func (t *Tokenizer) Decode(ids []int32) string {
	keep := make([]int32, 0, len(ids))
	for _, id := range ids {
		if id < t.TimestampBegin {
			keep = append(keep, id)
		}
	}
	return t.bpe.Decode(keep, false)
}

// NonSpeechTokens is mlx-whisper's non_speech_tokens: speaker tags and
// annotation symbols, keeping ordinary punctuation.
func (t *Tokenizer) NonSpeechTokens() ([]int32, error) {
	symbols := strings.Split(`"#()*+/:;<=>@[\]^_`+"`"+`{|}~「」『』`, "")
	symbols = append(symbols, strings.Fields(`<< >> <<< >>> -- --- -( -[ (' (" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪`)...)
	misc := strings.Split("♩♪♫♬♭♮♯", "")
	set := map[int32]bool{}
	for _, s := range []string{" -", " '"} {
		ids, err := t.Encode(s)
		if err != nil || len(ids) == 0 {
			return nil, fmt.Errorf("cannot encode %q: %v", s, err)
		}
		set[ids[0]] = true
	}
	for i, sym := range append(symbols, misc...) {
		isMisc := i >= len(symbols)
		for _, s := range []string{sym, " " + sym} {
			ids, err := t.Encode(s)
			if err != nil {
				return nil, err
			}
			if len(ids) == 1 || isMisc && len(ids) > 0 {
				set[ids[0]] = true
			}
		}
	}
	out := make([]int32, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// SuppressTokens is DecodingTask._get_suppress_tokens for suppress_tokens
// "-1": the non-speech tokens and the task, start and no-speech tokens.
func (t *Tokenizer) SuppressTokens() ([]int32, error) {
	ids, err := t.NonSpeechTokens()
	if err != nil {
		return nil, err
	}
	ids = append(ids, t.Transcribe, t.Translate, t.SOT, t.SOTPrev, t.SOTLM, t.NoSpeech)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
