package whisper

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Formats are the output formats Write knows: mlx-whisper's writers (text,
// srt, vtt, tsv) and OpenAI's response formats (json, verbose_json).
var Formats = []string{"text", "json", "verbose_json", "srt", "vtt", "tsv"}

// formatTimestamp is writers.format_timestamp: milliseconds rounded half to
// even (Python's round), hours only when asked for or non-zero.
func formatTimestamp(seconds float64, alwaysHours bool, decimal string) string {
	ms := int64(math.RoundToEven(math.Max(0, seconds) * 1000))
	h := ms / 3_600_000
	ms -= h * 3_600_000
	m := ms / 60_000
	ms -= m * 60_000
	s := ms / 1000
	ms -= s * 1000
	hours := ""
	if alwaysHours || h > 0 {
		hours = fmt.Sprintf("%02d:", h)
	}
	return fmt.Sprintf("%s%02d:%02d%s%03d", hours, m, s, decimal, ms)
}

// Write prints r in format: text (each segment's text, stripped, one per
// line, as WriteTXT), json ({"text": ...}, OpenAI's json), verbose_json
// (OpenAI's: task, language, duration, text, segments), srt, vtt and tsv
// (WriteSRT, WriteVTT, WriteTSV, segment times).
func Write(w io.Writer, format, task string, r *Result) error {
	var b strings.Builder
	switch format {
	case "text":
		for _, s := range r.Segments {
			b.WriteString(trimSpace(s.Text) + "\n")
		}
	case "json":
		if err := writeJSON(&b, struct {
			Text string `json:"text"`
		}{r.Text}); err != nil {
			return err
		}
	case "verbose_json":
		if task == "" {
			task = "transcribe"
		}
		if err := writeJSON(&b, struct {
			Task     string    `json:"task"`
			Language string    `json:"language"`
			Duration float64   `json:"duration"`
			Text     string    `json:"text"`
			Segments []Segment `json:"segments"`
		}{task, LanguageName(r.Language), r.Duration, r.Text, r.Segments}); err != nil {
			return err
		}
	case "srt":
		for i, s := range subtitles(r) {
			fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n\n", i+1, formatTimestamp(s.start, true, ","), formatTimestamp(s.end, true, ","), s.text)
		}
	case "vtt":
		b.WriteString("WEBVTT\n\n")
		for _, s := range subtitles(r) {
			fmt.Fprintf(&b, "%s --> %s\n%s\n\n", formatTimestamp(s.start, false, "."), formatTimestamp(s.end, false, "."), s.text)
		}
	case "tsv":
		b.WriteString("start\tend\ttext\n")
		for _, s := range r.Segments {
			fmt.Fprintf(&b, "%d\t%d\t%s\n", int64(math.RoundToEven(1000*s.Start)), int64(math.RoundToEven(1000*s.End)), strings.ReplaceAll(trimSpace(s.Text), "\t", " "))
		}
	default:
		return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeJSON writes v as one line, without HTML escaping (a transcript's
// "<" and ">" stay as they are).
func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e.Encode(v)
}

type subtitle struct {
	start, end float64
	text       string
}

// subtitles is SubtitlesWriter.iterate_result with its defaults: a segment
// per subtitle; with word timestamps, the words of each segment that has
// any, from its first word's start to its last word's end, the first word
// stripped (no "-->" replacement there, as in mlx-whisper).
func subtitles(r *Result) []subtitle {
	var out []subtitle
	if len(r.Segments) > 0 && r.Segments[0].Words != nil {
		for _, s := range r.Segments {
			if len(s.Words) == 0 {
				continue
			}
			text := trimSpace(s.Words[0].Word)
			for _, w := range s.Words[1:] {
				text += w.Word
			}
			out = append(out, subtitle{s.Words[0].Start, s.Words[len(s.Words)-1].End, text})
		}
		return out
	}
	for _, s := range r.Segments {
		out = append(out, subtitle{s.Start, s.End, subtitleText(s.Text)})
	}
	return out
}

func subtitleText(s string) string { return strings.ReplaceAll(trimSpace(s), "-->", "->") }

// LanguageName is OpenAI's verbose_json language: the English name.
func LanguageName(code string) string {
	names := map[string]string{"en": "english", "zh": "chinese", "de": "german", "es": "spanish", "ru": "russian",
		"ko": "korean", "fr": "french", "ja": "japanese", "pt": "portuguese", "tr": "turkish", "pl": "polish",
		"ca": "catalan", "nl": "dutch", "ar": "arabic", "sv": "swedish", "it": "italian", "id": "indonesian",
		"hi": "hindi", "fi": "finnish", "vi": "vietnamese", "he": "hebrew", "uk": "ukrainian", "el": "greek"}
	if n, ok := names[code]; ok {
		return n
	}
	return code
}
