package main

import (
	"io"
	"strings"
	"testing"
)

// TestServeDraftFlags: --draft-model runs one request at a time, so it is
// refused with --batch > 1 (and --max-kv-size, whose rotating caches cannot
// be trimmed) before anything loads; --num-draft-tokens defaults to
// mlx_lm.server's 3.
func TestServeDraftFlags(t *testing.T) {
	c := &serveCommand{m: &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	f, err := c.parse([]string{"--draft-model", "d.gguf"})
	if err != nil || f.draftModel != "d.gguf" || f.numDraft != 3 {
		t.Fatalf("parse: %+v, %v", f, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--draft-model", "d.gguf", "--batch", "2"}, "--draft-model cannot be combined with --batch 2"},
		{[]string{"--draft-model", "d.gguf", "--max-kv-size", "64"}, "--draft-model cannot be used with --max-kv-size"},
		{[]string{"--num-draft-tokens", "-1"}, "--num-draft-tokens must be 0 or more"},
	} {
		_, err := c.parse(tc.args)
		if _, usage := err.(usageError); !usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
