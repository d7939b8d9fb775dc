package whisper

import (
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	r := &Result{
		Text: " Hello there. General --> Kenobi", Language: "en", Duration: 3661.5,
		Segments: []Segment{
			{ID: 0, Start: 0, End: 1.0005, Text: " Hello there.", Tokens: []int32{50363, 15496, 50413}},
			{ID: 1, Seek: 3000, Start: 3600.25, End: 3661.5, Text: " General\t--> Kenobi", Tokens: []int32{}},
		},
	}
	for _, tc := range []struct{ format, want string }{
		{"text", "Hello there.\nGeneral\t--> Kenobi\n"},
		{"json", `{"text":" Hello there. General --> Kenobi"}` + "\n"},
		{"srt", "1\n00:00:00,000 --> 00:00:01,000\nHello there.\n\n2\n01:00:00,250 --> 01:01:01,500\nGeneral\t-> Kenobi\n\n"},
		{"vtt", "WEBVTT\n\n00:00.000 --> 00:01.000\nHello there.\n\n01:00:00.250 --> 01:01:01.500\nGeneral\t-> Kenobi\n\n"},
		{"tsv", "start\tend\ttext\n0\t1000\tHello there.\n3600250\t3661500\tGeneral --> Kenobi\n"},
		{"verbose_json", `{"task":"transcribe","language":"english","duration":3661.5,"text":" Hello there. General --> Kenobi","segments":[` +
			`{"id":0,"seek":0,"start":0,"end":1.0005,"text":" Hello there.","tokens":[50363,15496,50413],"temperature":0,"avg_logprob":0,"compression_ratio":0,"no_speech_prob":0},` +
			`{"id":1,"seek":3000,"start":3600.25,"end":3661.5,"text":" General\t--> Kenobi","tokens":[],"temperature":0,"avg_logprob":0,"compression_ratio":0,"no_speech_prob":0}]}` + "\n"},
	} {
		var b strings.Builder
		if err := Write(&b, tc.format, "", r); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.format, b.String(), tc.want)
		}
	}
	if err := Write(&strings.Builder{}, "mp3", "", r); err == nil {
		t.Error("format mp3: no error")
	}
}

// 1.0005 s is 1000.5 ms: Python's round() goes to the even 1000.
func TestFormatTimestamp(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{{0, "00:00.000"}, {1.0005, "00:01.000"}, {59.9999, "01:00.000"}, {3600, "01:00:00.000"}, {7.74, "00:07.740"}} {
		if got := formatTimestamp(tc.s, false, "."); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.s, got, tc.want)
		}
	}
}
