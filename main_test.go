package main

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run "mlxgo" in-process as a real command, with its
// own stdin, stdout, stderr and exit status.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"mlxgo": func() {
			mm := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
			os.Exit(mm.Run(context.Background(), os.Args[1:]))
		},
	})
}

// TestScripts runs the CLI scripts in testdata/script: what a user types and
// what they must see. Scripts that need the native pack or registry data check
// for it with the [native] / [data] conditions and fail in CI when absent.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(t))
}
