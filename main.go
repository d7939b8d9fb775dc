// Command mlxgo runs language, embedding and speech models on Apple's MLX through
// a native pack loaded at run time (no cgo).
//
// Every subcommand is a small type in its own file of package main with
// Run(ctx, args) error and Usage(). They parse flags, call packages, and return
// errors; only main maps errors to exit codes and prints them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mlxgo/mlxgo/native"
)

// Version is set by the Makefile with -ldflags "-X main.Version=...".
var Version = "dev"

const usage = `mlxgo runs MLX models locally: one binary, a verified native pack.

Usage:
	mlxgo <command> [flags] [arguments]

Commands:
	generate       generate text from a prompt (stdin or -p)
	serve          serve an OpenAI-compatible HTTP API
	embed          compute sentence embeddings
	transcribe     transcribe speech
	tokenize       encode or decode text with a model's tokenizer
	pull           download a model from the Hugging Face hub into its cache
	ls             list the models in the Hugging Face cache
	rm             remove a model from the Hugging Face cache
	verify-native  check the native pack, the CPU and the MLX devices
	launch         run a command on several ranks (MLX's distributed backends)
	version        print the version

Run "mlxgo <command> -h" for the flags of a command.

Examples:
	$ echo "Write a haiku about the sea" | mlxgo generate -m ./model
	$ mlxgo pull HuggingFaceTB/SmolLM2-135M-Instruct
	$ mlxgo verify-native --json
`

// errUsage marks an error in how mlxgo was called: exit status 2 and a hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// errNotImplemented is returned by commands whose issue has not landed yet.
var errNotImplemented = usageError{"not implemented yet"}

// command is one subcommand: its own flag set, its own file.
type command interface {
	Run(ctx context.Context, args []string) error
}

// Main holds the process's standard streams so that tests can run commands
// in-process with their own.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

func main() {
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Run dispatches to a subcommand and maps its error to an exit status:
// 0 success or help, 2 usage error, 1 any other failure.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	name, rest := args[0], args[1:]
	var cmd command
	switch name {
	case "generate":
		cmd = &generateCommand{m: m}
	case "serve":
		cmd = &serveCommand{m: m}
	case "embed":
		cmd = &embedCommand{m: m}
	case "transcribe":
		cmd = &transcribeCommand{m: m}
	case "tokenize":
		cmd = &tokenizeCommand{m: m}
	case "pull":
		cmd = &pullCommand{m: m}
	case "ls":
		cmd = &lsCommand{m: m}
	case "rm":
		cmd = &rmCommand{m: m}
	case "verify-native":
		cmd = &verifyNativeCommand{m: m}
	case "version":
		cmd = &versionCommand{m: m}
	case "launch":
		cmd = &launchCommand{m: m}
	case "help", "-h", "-help", "--help":
		fmt.Fprint(m.Stderr, usage)
		return 0
	default:
		fmt.Fprintf(m.Stderr, "mlxgo: error: unknown command %q\n", name)
		fmt.Fprintln(m.Stderr, `mlxgo: hint: run "mlxgo help" for the list of commands`)
		return 2
	}
	modelFetch.ctx, modelFetch.stderr, modelFetch.pull = ctx, m.Stderr, false
	err := cmd.Run(ctx, rest)
	return m.exitCode(name, err)
}

func (m *Main) exitCode(name string, err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(m.Stderr, "mlxgo: error: %s: %s\n", name, oneLine(err.Error()))
		if err != errNotImplemented {
			fmt.Fprintf(m.Stderr, "mlxgo: hint: run \"mlxgo %s -h\" for usage\n", name)
		}
		return 2
	case errors.Is(err, context.Canceled):
		// Ctrl-C: what was printed stays; say nothing more than that we stopped.
		fmt.Fprintln(m.Stderr, "mlxgo: interrupted")
		return 130
	default:
		fmt.Fprintf(m.Stderr, "mlxgo: error: %s\n", oneLine(err.Error()))
		return 1
	}
}

// oneLine keeps each diagnostic on one line, whatever a lower layer returned.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// cmdFlags is a command's flag set together with its usage text.
type cmdFlags struct {
	*flag.FlagSet
	usage string
}

// newFlagSet makes a command's flag set. The flag package prints usage on
// every parse error; we print it only for -h, and report other errors as one
// line with a hint (see exitCode).
func (m *Main) newFlagSet(name, usageText string) *cmdFlags {
	fs := flag.NewFlagSet("mlxgo "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, usage: usageText}
}

// parseFlags parses args; -h prints usage to stderr (exit 0), a bad flag is a
// usage error (exit 2).
func (m *Main) parseFlags(fs *cmdFlags, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(m.Stderr, fs.usage)
			return err
		}
		return usageError{err.Error()}
	}
	return nil
}

// notYet answers for subcommands whose issue has not landed.
type notYet struct {
	m    *Main
	name string
}

func (c notYet) Run(ctx context.Context, args []string) error { return errNotImplemented }

type versionCommand struct{ m *Main }

func (c *versionCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("version", "Usage: mlxgo version\n\nPrints the mlxgo version and the native pack version it expects.\n")
	if err := c.m.parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(c.m.Stdout, "mlxgo %s (native pack %s, MLX %s)\n", Version, native.PackVersion, native.MLXVersion)
	return nil
}
