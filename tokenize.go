package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mlxgo/mlxgo/server"
	"github.com/mlxgo/mlxgo/tok"
	"github.com/mlxgo/mlxgo/tok/chat"
)

const tokenizeUsage = `Usage: mlxgo tokenize -m PATH [flags]

Encodes text with a model's tokenizer and prints the ids as a JSON array.
PATH is a model directory (tokenizer.json, tokenizer_config.json), a
tokenizer.json file, or a .gguf file. Text comes from stdin unless -p is given;
one trailing newline of stdin is dropped.

Flags:
	-m PATH                 the model (required)
	-p TEXT                 the text to encode instead of stdin
	--chat                  stdin is a JSON list of {"role", "content"} messages;
	                        render the model's chat template, then encode
	--no-generation-prompt  with --chat: leave out the assistant prompt
	--tools FILE            with --chat: tool definitions (a JSON list)
	--template-kwargs JSON  with --chat: extra template variables
	--render                with --chat: print the rendered text, not ids
	--no-special            do not add special tokens (BOS, CLS...)
	--decode                stdin is a JSON array of ids; print the text
	--skip-special          with --decode: leave special tokens out

Special tokens are added as the tokenizer's post-processor says, except for
--chat, where the template writes them itself (as transformers'
apply_chat_template does).

Examples:
	$ echo "Hello world" | mlxgo tokenize -m ./model
	[9707,1879]
	$ echo '[{"role":"user","content":"Hi"}]' | mlxgo tokenize -m ./model --chat --render
	$ echo '[9707,1879]' | mlxgo tokenize -m ./model --decode
`

type tokenizeCommand struct{ m *Main }

func (c *tokenizeCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("tokenize", tokenizeUsage)
	model := fs.String("m", "", "model path")
	prompt := fs.String("p", "", "text")
	chatMode := fs.Bool("chat", false, "render chat messages")
	noGen := fs.Bool("no-generation-prompt", false, "no generation prompt")
	toolsFile := fs.String("tools", "", "tools JSON file")
	kwargs := fs.String("template-kwargs", "", "template kwargs JSON")
	render := fs.Bool("render", false, "print rendered text")
	noSpecial := fs.Bool("no-special", false, "no special tokens")
	decode := fs.Bool("decode", false, "decode ids")
	skipSpecial := fs.Bool("skip-special", false, "skip special tokens when decoding")
	if err := c.m.parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *model == "":
		return usagef("-m is required")
	case fs.NArg() > 0:
		return usagef("unexpected argument %q", fs.Arg(0))
	case *decode && (*chatMode || *render || *prompt != ""):
		return usagef("--decode cannot be combined with --chat, --render or -p")
	case !*chatMode && (*render || *noGen || *toolsFile != "" || *kwargs != ""):
		return usagef("--render, --no-generation-prompt, --tools and --template-kwargs need --chat")
	case *chatMode && *prompt != "":
		return usagef("--chat reads messages from stdin; -p cannot be used with it")
	}
	t, err := tok.Load(*model)
	if err != nil {
		return err
	}
	var input []byte
	if *prompt != "" {
		input = []byte(*prompt)
	} else if input, err = io.ReadAll(c.m.Stdin); err != nil {
		return fmt.Errorf("cannot read stdin: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	if *decode {
		var ids []int32
		if err := json.Unmarshal(input, &ids); err != nil {
			return fmt.Errorf("cannot read ids: want a JSON array of integers: %w", err)
		}
		_, err := fmt.Fprintln(c.m.Stdout, t.Decode(ids, *skipSpecial))
		return err
	}

	text := string(input)
	addSpecial := !*noSpecial
	if *chatMode {
		opts := chat.Options{AddGenerationPrompt: !*noGen}
		if *toolsFile != "" {
			b, err := os.ReadFile(*toolsFile)
			if err != nil {
				return fmt.Errorf("cannot read tools: %w", err)
			}
			var tools []json.RawMessage
			if err := json.Unmarshal(b, &tools); err != nil {
				return fmt.Errorf("cannot read tools %s: want a JSON list: %w", *toolsFile, err)
			}
			for _, tl := range tools {
				opts.Tools = append(opts.Tools, tl)
			}
		}
		if *kwargs != "" {
			if err := json.Unmarshal([]byte(*kwargs), &opts.Kwargs); err != nil {
				return usagef("--template-kwargs: want a JSON object: %v", err)
			}
		}
		// The one chat-encoding path (server.ChatTemplate), as generate and serve render.
		if text, err = server.NewChatTemplate(t).Render(input, opts); err != nil {
			return err
		}
		if *render {
			_, err := io.WriteString(c.m.Stdout, text)
			return err
		}
		addSpecial = false
	} else if *prompt == "" {
		// A line read from a pipe ends in a newline the user did not mean to encode.
		text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
	}
	ids, err := t.Encode(text, addSpecial)
	if err != nil {
		return fmt.Errorf("cannot encode: %w", err)
	}
	out, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "%s\n", out)
	return err
}
