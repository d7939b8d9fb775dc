package main

import "context"

// verifyNativeCommand is filled in by the native-runtime issue.
type verifyNativeCommand struct{ m *Main }

func (c *verifyNativeCommand) Run(ctx context.Context, args []string) error { return errNotImplemented }
