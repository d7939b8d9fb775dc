package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/embed"
)

const embedUsage = `Usage: mlxgo embed -m PATH [flags] < texts.txt

Computes one sentence embedding per input line (or for -p TEXT) and writes one
line per input, in input order, to stdout. PATH is a sentence-transformers
model directory (BERT family: config.json, model.safetensors, tokenizer.json,
modules.json, 1_Pooling/) or a Qwen3-Embedding-style qwen3 directory, or
such a model's Hugging Face repo id (ORG/NAME[@REV], --pull to fetch it).

Every line of stdin is one input; an empty line is an error (it has no
meaning as a text, and skipping it would shift every later index). A trailing
carriage return is dropped.

Flags:
	-m PATH            the model directory (required)
	-p TEXT            embed TEXT instead of reading stdin
	--format FORMAT    jsonl: {"index":0,"embedding":[...]} per line (default);
	                   tsv: index, then the values, tab-separated
	--batch-size N     inputs per forward pass (default 32)
	--no-normalize     print pooled vectors without L2 normalization
	--instruction TEXT prefix each input as "Instruct: TEXT\nQuery:" (for
	                   instruction-tuned embedders such as Qwen3-Embedding)
	--truncate         cut inputs longer than the model's maximum length
	                   instead of failing on them
` + runtimeUsage + `
Values are float32, printed so that parsing them as float32 gives the same bits.

Example:
	$ printf 'A cat sits.\nEin Hund läuft.\n' | mlxgo embed -m ./all-MiniLM-L6-v2
	{"index":0,"embedding":[0.0412,...]}
	{"index":1,"embedding":[-0.0135,...]}
`

type embedCommand struct{ m *Main }

type embedFlags struct {
	model, prompt, format, instruction string
	promptSet, noNormalize, truncate   bool
	batchSize                          int
	rt                                 runtimeFlags
}

func (c *embedCommand) parse(args []string) (*embedFlags, error) {
	fs := c.m.newFlagSet("embed", embedUsage)
	f := &embedFlags{}
	fs.StringVar(&f.model, "m", "", "")
	fs.StringVar(&f.prompt, "p", "", "")
	fs.StringVar(&f.format, "format", "jsonl", "")
	fs.IntVar(&f.batchSize, "batch-size", 32, "")
	fs.BoolVar(&f.noNormalize, "no-normalize", false, "")
	fs.StringVar(&f.instruction, "instruction", "", "")
	fs.BoolVar(&f.truncate, "truncate", false, "")
	f.rt.register(fs)
	if err := c.m.parseFlags(fs, args); err != nil {
		return nil, err
	}
	if err := f.rt.resolve(os.Getenv); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "p" {
			f.promptSet = true
		}
	})
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	case f.model == "":
		return nil, usagef("-m PATH is required")
	case f.format != "jsonl" && f.format != "tsv":
		return nil, usagef("--format %q: want jsonl or tsv", f.format)
	case f.batchSize < 1:
		return nil, usagef("--batch-size %d: want at least 1", f.batchSize)
	}
	return f, nil
}

func (c *embedCommand) Run(ctx context.Context, args []string) error {
	f, err := c.parse(args)
	if err != nil {
		return err
	}
	var texts []string
	if f.promptSet {
		if f.prompt == "" {
			return usagef("-p: the text is empty")
		}
		texts = []string{f.prompt}
	} else if texts, err = readLines(c.m.Stdin); err != nil {
		return err
	}
	if len(texts) == 0 {
		return usagef("no input: pipe one text per line into stdin, or use -p TEXT")
	}
	if f.model, err = resolveRepoArg(f.model, os.Getenv); err != nil {
		return err
	}
	if err := loadMLX(ctx, &f.rt); err != nil {
		return err
	}
	model, err := embed.LoadWith(f.model, f.rt.load(models.LoadOptions{}))
	if err != nil {
		return fmt.Errorf("cannot load embedding model: %w", err)
	}
	defer model.Close()
	inputs := make([]embed.Input, len(texts))
	for i, s := range texts {
		inputs[i] = embed.Input{Text: s}
	}
	res, err := model.Embed(ctx, inputs, embed.Options{
		BatchSize: f.batchSize, NoNormalize: f.noNormalize, Truncate: f.truncate, Instruction: f.instruction,
	})
	var tooLong *embed.TooLongError
	switch {
	case errors.As(err, &tooLong):
		return fmt.Errorf("%s has %d tokens, more than the model's maximum of %d (use --truncate to cut it)",
			inputName(f, tooLong.Index), tooLong.Tokens, tooLong.Max)
	case errors.Is(err, embed.ErrEmptyInput):
		return fmt.Errorf("cannot embed: %w", err)
	case err != nil:
		return err
	}
	return writeEmbeddings(c.m.Stdout, f.format, res.Embeddings)
}

func inputName(f *embedFlags, index int) string {
	if f.promptSet {
		return "the -p text"
	}
	return fmt.Sprintf("line %d", index+1)
}

// readLines is stdin split into lines; an empty line is an error naming it.
func readLines(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []string
	for sc.Scan() {
		s := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("line %d is empty: every line is one text to embed", len(out)+1)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read stdin: %w", err)
	}
	return out, nil
}

// writeEmbeddings prints each vector on its own line, with float32 values
// in the shortest form that parses back to the same float32.
func writeEmbeddings(w io.Writer, format string, vecs [][]float32) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf []byte
	for i, v := range vecs {
		buf = buf[:0]
		sep := byte('\t')
		if format == "jsonl" {
			buf = append(buf, `{"index":`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, `,"embedding":[`...)
			sep = ','
		} else {
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, '\t')
		}
		for j, x := range v {
			if j > 0 {
				buf = append(buf, sep)
			}
			buf = strconv.AppendFloat(buf, float64(x), 'g', -1, 32)
		}
		if format == "jsonl" {
			buf = append(buf, "]}"...)
		}
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("cannot write output: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("cannot write output: %w", err)
	}
	return nil
}
