package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrNoFFmpeg is returned by DecodeFFmpeg when ffmpeg is not on PATH.
var ErrNoFFmpeg = errors.New("ffmpeg is not on PATH")

// DecodeFFmpeg decodes any format ffmpeg reads into 16 kHz mono, with the
// command mlx-whisper's load_audio runs (s16le, one channel, 16 kHz): path
// names the file, or with path "" data is piped to ffmpeg's stdin.
func DecodeFFmpeg(ctx context.Context, path string, data []byte) ([]float32, *Clip, error) {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, nil, ErrNoFFmpeg
	}
	args := []string{"-nostdin", "-i", path}
	if path == "" {
		args = []string{"-i", "pipe:0"}
	}
	args = append(args, "-threads", "0", "-f", "s16le", "-ac", "1", "-acodec", "pcm_s16le", "-ar", "16000", "-")
	cmd := exec.CommandContext(ctx, bin, args...)
	if path == "" {
		cmd.Stdin = bytes.NewReader(data)
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, nil, fmt.Errorf("ffmpeg cannot decode it: %v: %s", err, msg)
	}
	b := out.Bytes()
	x := make([]float32, len(b)/2)
	for i := range x {
		x[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:]))) / 32768
	}
	return x, &Clip{Rate: SampleRate, Channels: 1, Format: "ffmpeg s16le", Samples: x}, nil
}
