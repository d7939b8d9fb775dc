package main

import "context"

// tokenizeCommand is filled in by the tokenizer issue.
type tokenizeCommand struct{ m *Main }

func (c *tokenizeCommand) Run(ctx context.Context, args []string) error { return errNotImplemented }
