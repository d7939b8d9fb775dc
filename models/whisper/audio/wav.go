// Package audio turns a WAV stream into what Whisper reads: 16 kHz mono
// float32 samples, and from them the log-mel spectrogram (mel.go).
//
// The WAV reader is pure Go and never trusts a header: every size is checked
// against what the stream holds, so a truncated or malformed file is an error
// naming what is wrong, never a panic or an allocation the header asks for.
package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// SampleRate is the rate Whisper's log-mel front end expects.
const SampleRate = 16000

// WAV format tags (RIFF's wFormatTag and the EXTENSIBLE sub-format's first two bytes).
const (
	formatPCM        = 0x0001
	formatFloat      = 0x0003
	formatExtensible = 0xFFFE
)

// MaxChannels bounds the channel count the reader accepts.
const MaxChannels = 64

// Clip is decoded audio: Samples holds Channels interleaved channels at Rate
// frames per second, as floats in [-1, 1] (float WAVs may exceed it).
type Clip struct {
	Rate, Channels int
	// Format names the sample encoding read, e.g. "pcm16" or "float32".
	Format  string
	Samples []float32
}

// Frames is the number of sample frames (samples per channel).
func (c *Clip) Frames() int {
	if c.Channels == 0 {
		return 0
	}
	return len(c.Samples) / c.Channels
}

// Duration is the clip's length in seconds.
func (c *Clip) Duration() float64 { return float64(c.Frames()) / float64(c.Rate) }

// Mono averages the channels of each frame, as ffmpeg's -ac 1 downmix does.
func (c *Clip) Mono() []float32 {
	if c.Channels == 1 {
		return append([]float32(nil), c.Samples...)
	}
	n := c.Frames()
	out := make([]float32, n)
	inv := 1 / float64(c.Channels)
	for i := range n {
		var s float64
		for ch := range c.Channels {
			s += float64(c.Samples[i*c.Channels+ch])
		}
		out[i] = float32(s * inv)
	}
	return out
}

// ErrNotWAV is returned for a stream that does not start with a RIFF/WAVE header.
var ErrNotWAV = errors.New("not a WAV file (no RIFF/WAVE header)")

// unknownSize is how streaming writers (ffmpeg, sox to a pipe) mark a RIFF or
// data size they could not seek back to fill in: all ones, or close to it.
func unknownSize(n uint32) bool { return n == 0 || n >= 0x7FFF0000 }

// DecodeWAV reads a whole RIFF/WAVE stream: PCM (8-bit unsigned, 16, 24,
// 32-bit signed), IEEE float (32, 64-bit), plain or WAVE_FORMAT_EXTENSIBLE,
// any rate and channel count. A data chunk whose declared size is longer than
// the stream is an error, unless the header marks its sizes as unknown (as
// ffmpeg and sox do when writing to a pipe): then the data runs to the end.
func DecodeWAV(r io.Reader) (*Clip, error) {
	var hdr [12]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if n == 0 {
			return nil, fmt.Errorf("empty input: %w", ErrNotWAV)
		}
		return nil, fmt.Errorf("truncated WAV header (%d bytes)", n)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		if string(hdr[0:4]) == "RF64" {
			return nil, errors.New("RF64 WAV files are not supported")
		}
		return nil, ErrNotWAV
	}
	riffUnknown := unknownSize(binary.LittleEndian.Uint32(hdr[4:8]))
	var (
		f       *fmtChunk
		scratch [8]byte
	)
	for {
		if n, err := io.ReadFull(r, scratch[:]); err != nil {
			if n == 0 && errors.Is(err, io.EOF) {
				if f == nil {
					return nil, errors.New("WAV file has no fmt chunk")
				}
				return nil, errors.New("WAV file has no data chunk")
			}
			return nil, fmt.Errorf("truncated WAV chunk header")
		}
		id, size := string(scratch[0:4]), binary.LittleEndian.Uint32(scratch[4:8])
		switch id {
		case "fmt ":
			if f != nil {
				return nil, errors.New("WAV file has two fmt chunks")
			}
			if size < 16 || size > 1024 {
				return nil, fmt.Errorf("WAV fmt chunk of %d bytes (want 16 to 1024)", size)
			}
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, errors.New("truncated WAV fmt chunk")
			}
			var err error
			if f, err = parseFmt(b[:size]); err != nil {
				return nil, err
			}
		case "data":
			if f == nil {
				return nil, errors.New("WAV data chunk before its fmt chunk")
			}
			return readData(r, f, size, riffUnknown)
		default:
			// LIST, fact, cue, ...: skip, with RIFF's pad byte.
			skip := int64(size) + int64(size%2)
			if n, err := io.CopyN(io.Discard, r, skip); err != nil {
				return nil, fmt.Errorf("truncated WAV %q chunk (%d of %d bytes)", id, n, skip)
			}
		}
	}
}

type fmtChunk struct {
	tag                  uint16
	channels, rate, bits int
	align                int
}

func parseFmt(b []byte) (*fmtChunk, error) {
	f := &fmtChunk{
		tag:      binary.LittleEndian.Uint16(b[0:2]),
		channels: int(binary.LittleEndian.Uint16(b[2:4])),
		rate:     int(binary.LittleEndian.Uint32(b[4:8])),
		align:    int(binary.LittleEndian.Uint16(b[12:14])),
		bits:     int(binary.LittleEndian.Uint16(b[14:16])),
	}
	if f.tag == formatExtensible {
		if len(b) < 40 || binary.LittleEndian.Uint16(b[16:18]) < 22 {
			return nil, errors.New("WAVE_FORMAT_EXTENSIBLE fmt chunk is too short")
		}
		// The sub-format GUID is the format tag followed by KSDATAFORMAT's fixed tail.
		sub := b[24:40]
		if !bytes.Equal(sub[2:], []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}) {
			return nil, fmt.Errorf("WAVE_FORMAT_EXTENSIBLE sub-format %x is not PCM or IEEE float", sub)
		}
		f.tag = binary.LittleEndian.Uint16(sub[0:2])
		if valid := int(binary.LittleEndian.Uint16(b[18:20])); valid != 0 && valid != f.bits {
			// Valid bits below the container size: the low bits are zero
			// padding, so reading the whole container gives the same value.
			if valid > f.bits {
				return nil, fmt.Errorf("WAV valid bits %d exceed the container's %d", valid, f.bits)
			}
		}
	}
	switch {
	case f.channels < 1 || f.channels > MaxChannels:
		return nil, fmt.Errorf("WAV file has %d channels (want 1 to %d)", f.channels, MaxChannels)
	case f.rate < 1000 || f.rate > 768000:
		return nil, fmt.Errorf("WAV sample rate %d Hz is out of range (1000 to 768000)", f.rate)
	}
	switch {
	case f.tag == formatPCM && (f.bits == 8 || f.bits == 16 || f.bits == 24 || f.bits == 32):
	case f.tag == formatFloat && (f.bits == 32 || f.bits == 64):
	case f.tag == formatPCM || f.tag == formatFloat:
		return nil, fmt.Errorf("WAV %s with %d bits per sample is not supported", tagName(f.tag), f.bits)
	default:
		return nil, fmt.Errorf("WAV format tag 0x%04x is not supported (PCM or IEEE float only; convert it with ffmpeg)", f.tag)
	}
	if want := f.channels * f.bits / 8; f.align != want {
		return nil, fmt.Errorf("WAV block align %d, want %d for %d channels of %d bits", f.align, want, f.channels, f.bits)
	}
	return f, nil
}

func tagName(tag uint16) string {
	if tag == formatFloat {
		return "IEEE float"
	}
	return "PCM"
}

func (f *fmtChunk) format() string {
	if f.tag == formatFloat {
		return fmt.Sprintf("float%d", f.bits)
	}
	return fmt.Sprintf("pcm%d", f.bits)
}

// readData reads the data chunk. size is what the chunk declares; when it (or
// the RIFF size) is marked unknown, the data runs to the end of the stream.
func readData(r io.Reader, f *fmtChunk, size uint32, riffUnknown bool) (*Clip, error) {
	var data []byte
	var err error
	if unknownSize(size) || riffUnknown {
		data, err = io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("cannot read WAV data: %w", err)
		}
		if !unknownSize(size) && uint64(len(data)) > uint64(size) {
			data = data[:size]
		}
	} else {
		// Read what is there before believing the size: a header may claim 4 GiB.
		var buf bytes.Buffer
		n, err := io.CopyN(&buf, r, int64(size))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("cannot read WAV data: %w", err)
		}
		if n < int64(size) {
			return nil, fmt.Errorf("truncated WAV data: the header declares %d bytes, the file holds %d", size, n)
		}
		data = buf.Bytes()
	}
	data = data[:len(data)-len(data)%f.align]
	c := &Clip{Rate: f.rate, Channels: f.channels, Format: f.format(), Samples: make([]float32, len(data)/(f.bits/8))}
	s := c.Samples
	switch f.format() {
	case "pcm8":
		for i, b := range data {
			s[i] = float32(int(b)-128) / 128
		}
	case "pcm16":
		for i := range s {
			s[i] = float32(int16(binary.LittleEndian.Uint16(data[2*i:]))) / 32768
		}
	case "pcm24":
		for i := range s {
			b := data[3*i:]
			v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
			s[i] = float32(v) / 8388608
		}
	case "pcm32":
		for i := range s {
			s[i] = float32(float64(int32(binary.LittleEndian.Uint32(data[4*i:]))) / 2147483648)
		}
	case "float32":
		for i := range s {
			s[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case "float64":
		for i := range s {
			s[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])))
		}
	}
	for _, v := range s {
		if v != v || math.IsInf(float64(v), 0) {
			return nil, errors.New("WAV float data holds NaN or infinity")
		}
	}
	return c, nil
}

// Load reads a WAV stream and returns Whisper's input: mono at 16 kHz.
func Load(r io.Reader) ([]float32, *Clip, error) {
	c, err := DecodeWAV(r)
	if err != nil {
		return nil, nil, err
	}
	return Resample(c.Mono(), c.Rate, SampleRate), c, nil
}
