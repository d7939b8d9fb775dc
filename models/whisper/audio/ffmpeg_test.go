package audio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stand-in ffmpeg on PATH: it checks it was asked for mlx-whisper's
// s16le 16 kHz mono and prints two samples.
func TestDecodeFFmpeg(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\ncase \"$*\" in *'-f s16le -ac 1 -acodec pcm_s16le -ar 16000 -'*) ;; *) echo bad args >&2; exit 1;; esac\n" +
		"case \"$*\" in *'-i pipe:0'*) cat >/dev/null;; esac\nprintf '\\000\\100\\000\\300'\n"
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	for _, path := range []string{"", "in.flac"} {
		x, c, err := DecodeFFmpeg(context.Background(), path, []byte("fLaC..."))
		if err != nil {
			t.Fatal(err)
		}
		if len(x) != 2 || x[0] != 0.5 || x[1] != -0.5 || c.Rate != 16000 {
			t.Fatalf("%q: samples %v clip %+v", path, x, c)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte("#!/bin/sh\necho 'in.xyz: Invalid data found when processing input' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := DecodeFFmpeg(context.Background(), "in.xyz", nil); err == nil || !strings.Contains(err.Error(), "Invalid data found") {
		t.Fatalf("error %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, _, err := DecodeFFmpeg(context.Background(), "x", nil); !errors.Is(err, ErrNoFFmpeg) {
		t.Fatalf("no ffmpeg: %v", err)
	}
}
