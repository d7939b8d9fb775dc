package main

import (
	"io"
	"strings"
	"testing"
)

// TestServeSamplingFlags: only the sampling flags given become defaults
// (the rest fall through to generation_config.json and mlx_lm.server's),
// --temperature is --temp, and a value out of range is a usage error.
func TestServeSamplingFlags(t *testing.T) {
	c := &serveCommand{m: &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	f, err := c.parse([]string{"--temperature", "0.7", "--top-k", "20", "--max-tokens", "64"})
	if err != nil {
		t.Fatal(err)
	}
	d := f.sampling
	if d.Temperature == nil || *d.Temperature != 0.7 || d.TopK == nil || *d.TopK != 20 || d.MaxTokens == nil || *d.MaxTokens != 64 {
		t.Errorf("defaults %s, want temperature=0.7 top_k=20 max_tokens=64", d)
	}
	if d.TopP != nil || d.MinP != nil {
		t.Errorf("flags not given became defaults: %s", d)
	}
	if f, err = c.parse([]string{"--temp", "0.2", "--top-p", "0.8", "--min-p", "0.05"}); err != nil {
		t.Fatal(err)
	}
	if got := f.sampling.String(); got != "temperature=0.2 top_p=0.8 min_p=0.05" {
		t.Errorf("defaults %q", got)
	}
	if f, err = c.parse(nil); err != nil || f.sampling.String() != "" {
		t.Errorf("no flags: defaults %q err %v", f.sampling.String(), err)
	}
	if _, err := c.parse([]string{"--top-p", "1.5"}); err == nil || !strings.Contains(err.Error(), "top_p") {
		t.Errorf("--top-p 1.5: %v, want a usage error naming top_p", err)
	}
}

// TestServeKVFlags: serve takes generate's KV flags with generate's checks,
// refuses --kv-bits with --batch > 1 before loading anything, and keeps
// --response-store's count.
func TestServeKVFlags(t *testing.T) {
	c := &serveCommand{m: &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	f, err := c.parse([]string{"--kv-bits", "8", "--kv-group-size", "32", "--quantized-kv-start", "0", "--response-store", "16"})
	if err != nil {
		t.Fatal(err)
	}
	if o := f.kv.options(); o.KVBits != 8 || o.KVGroupSize != 32 || f.kv.start != 0 || !f.kv.bitsSet || f.responseStore != 16 {
		t.Errorf("kv flags %+v, response store %d", f.kv, f.responseStore)
	}
	if f, err = c.parse(nil); err != nil || f.kv.bitsSet || f.kv.start != 5000 || f.kv.group != 64 || f.responseStore != 256 {
		t.Errorf("defaults: %+v %d %v", f.kv, f.responseStore, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kv-bits", "3"}, "--kv-bits must be 4 or 8"},
		{[]string{"--kv-bits", "4", "--max-kv-size", "512"}, "--kv-bits cannot be combined with --max-kv-size"},
		{[]string{"--kv-bits", "8", "--batch", "4"}, "--kv-bits cannot be combined with --batch 4"},
		{[]string{"--quantized-kv-start", "-1"}, "--quantized-kv-start"},
		{[]string{"--response-store", "-1"}, "--response-store"},
	} {
		if _, err := c.parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error naming %q", tc.args, err, tc.want)
		}
	}
}

// TestServeShardFlags: serve --shard takes tensor, pipeline or none, and
// refuses what is not distributed before loading anything.
func TestServeShardFlags(t *testing.T) {
	c := &serveCommand{m: &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	for _, kind := range []string{"tensor", "pipeline"} {
		if f, err := c.parse([]string{"--shard", kind, "--batch", "4"}); err != nil || f.shard.kind != kind || !f.shard.on() {
			t.Errorf("--shard %s: %+v %v", kind, f, err)
		}
	}
	if f, err := c.parse([]string{"--shard", "none"}); err != nil || f.shard.on() {
		t.Errorf("--shard none: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "data"}, "want tensor, pipeline or none"},
		{[]string{"--shard", "tensor", "--draft-model", "d"}, "--draft-model cannot be combined with --shard tensor"},
		{[]string{"--shard", "pipeline", "--whisper-model", "w"}, "--shard pipeline splits a chat model (-m)"},
		{[]string{"--shard", "tensor", "--adapter-path", "a"}, "LoRA adapters cannot be combined with --shard tensor"},
		{[]string{"--shard", "pipeline", "--adapter", "x=a"}, "LoRA adapters cannot be combined with --shard pipeline"},
	} {
		if _, err := c.parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error naming %q", tc.args, err, tc.want)
		}
	}
}
