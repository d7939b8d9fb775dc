package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdWriteSafetensors writes a safetensors file from a header given as text
// and a data section of zero bytes: `writesafetensors FILE HEADER NBYTES`.
// Scripts use it to build corrupt, truncated and oddly typed weight files.
func cmdWriteSafetensors(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: writesafetensors FILE HEADER NBYTES")
	}
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	var b bytes.Buffer
	ts.Check(binary.Write(&b, binary.LittleEndian, uint64(len(args[1]))))
	b.WriteString(args[1])
	b.Write(make([]byte, n))
	name := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(filepath.Dir(name), 0o755))
	ts.Check(os.WriteFile(name, b.Bytes(), 0o644))
}

// cmdHeadCopy copies the first N bytes of SRC to DST: `headcopy SRC DST N`
// (a truncated model file).
func cmdHeadCopy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: headcopy SRC DST N")
	}
	n, err := strconv.ParseInt(args[2], 10, 64)
	ts.Check(err)
	src, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer src.Close()
	dst, err := os.Create(ts.MkAbs(args[1]))
	ts.Check(err)
	_, err = io.CopyN(dst, src, n)
	ts.Check(err)
	ts.Check(dst.Close())
}

// cmdRepeat writes TEXT N times into FILE: `repeat FILE N TEXT` (a prompt
// longer than a model's context).
func cmdRepeat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: repeat FILE N TEXT")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(strings.Repeat(args[2], n)), 0o644))
}

// TestGenerateExitCodes: usage errors exit 2, failures 1, help 0, before
// any native library is needed.
func TestGenerateExitCodes(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	t.Setenv("HF_HUB_CACHE", filepath.Join(dir, "hub"))
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		msg   string
	}{
		{"help", []string{"-h"}, "", 0, "Usage: mlxgo generate"},
		{"bad flag", []string{"--bogus"}, "", 2, "flag provided but not defined: -bogus"},
		{"kv bits", []string{"--kv-bits", "3", "-p", "x"}, "", 2, "--kv-bits must be 4 or 8"},
		{"negative temp", []string{"--temp", "-0.5", "-p", "x"}, "", 2, "invalid temperature"},
		{"top-p", []string{"--temp", "1", "--top-p", "2", "-p", "x"}, "", 2, "invalid top-p"},
		{"raw with system", []string{"--raw", "--system", "s", "-p", "x"}, "", 2, "need the chat template"},
		{"kv bits with max kv", []string{"--kv-bits", "4", "--max-kv-size", "64", "-p", "x"}, "", 2, "cannot be combined"},
		{"extra argument", []string{"hello"}, "", 2, `unexpected argument "hello"`},
		{"no default model", []string{"-p", "x"}, "", 1, "default model is not installed"},
		{"missing path", []string{"-m", filepath.Join(dir, "nope"), "-p", "x"}, "", 1, "no such file or directory"},
		{"repo not cached", []string{"-m", "org/model", "-p", "x"}, "", 1, "not in the Hugging Face cache"},
		{"empty stdin", []string{"-m", empty}, "", 2, "the prompt is empty"},
		{"blank stdin", []string{"-m", empty}, " \n", 2, "the prompt is empty"},
		{"empty -p", []string{"-m", empty, "-p", ""}, "", 2, "the prompt is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			m := &Main{Stdin: strings.NewReader(tc.stdin), Stdout: &stdout, Stderr: &stderr}
			code := m.Run(context.Background(), append([]string{"generate"}, tc.args...))
			if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.msg)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q, want nothing", stdout.String())
			}
			if lines := strings.Count(stderr.String(), "mlxgo: error:"); code != 0 && lines != 1 {
				t.Fatalf("%d error lines, want one: %q", lines, stderr.String())
			}
		})
	}
}
