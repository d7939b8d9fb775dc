package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlxgo/mlxgo/hub"
)

const rmUsage = `Usage: mlxgo rm [--dry-run] ORG/NAME[@REVISION]
       mlxgo rm --prune [--yes]

Removes a model from the Hugging Face hub cache. ORG/NAME removes the whole
repo (every snapshot, blob and ref, and its lock files); ORG/NAME@REVISION
removes that revision's snapshot, the refs naming it, and the blobs no other
snapshot of the repo links to. --prune goes through the whole cache and
removes the blobs no snapshot links to and the partial downloads
(*.incomplete) of every repo: since that deletes more than one named model,
it only lists what it would remove unless --yes is given.

Flags:
	--dry-run    list what would be removed, remove nothing
	--prune      remove unlinked blobs and partial downloads of every repo
	--yes        with --prune: really remove them
`

type rmCommand struct{ m *Main }

func (c *rmCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("rm", rmUsage)
	dry := fs.Bool("dry-run", false, "")
	prune := fs.Bool("prune", false, "")
	yes := fs.Bool("yes", false, "")
	cache := hub.Cache{Dir: hub.CacheDir(os.Getenv)}
	var plan *hub.Removal
	var what string
	if err := c.m.parseFlags(fs, args); err != nil {
		return err
	}
	if *prune {
		if fs.NArg() > 0 {
			return usagef("--prune takes no model")
		}
		var err error
		if plan, err = cache.PlanPrune(); err != nil {
			return fmt.Errorf("cannot read the hub cache %s: %w", cache.Dir, err)
		}
		what = "unlinked blobs and partial downloads in " + cache.Dir
		*dry = *dry || !*yes
	} else {
		if *yes {
			return usagef("--yes goes with --prune")
		}
		ref, err := c.m.parseWithOneArg(fs, args, "ORG/NAME[@REVISION]")
		if err != nil {
			return err
		}
		repo, rev, err := hub.ParseRef(ref)
		if err != nil {
			return usagef("%v", err)
		}
		if !strings.Contains(ref, "@") {
			rev = ""
		}
		if plan, err = cache.PlanRemove(repo, rev); err != nil {
			return err
		}
		what = ref
	}
	if !*dry {
		if err := plan.Apply(); err != nil {
			return err
		}
	}
	for _, p := range plan.Paths {
		rel, err := filepath.Rel(cache.Dir, p)
		if err != nil {
			rel = p
		}
		if *dry {
			fmt.Fprintf(c.m.Stdout, "would remove %s\n", rel)
		} else {
			fmt.Fprintf(c.m.Stdout, "removed %s\n", rel)
		}
	}
	if *dry {
		fmt.Fprintf(c.m.Stderr, "mlxgo: %s: would free %s (dry run", what, hub.Bytes(plan.Bytes))
		if *prune {
			fmt.Fprint(c.m.Stderr, "; add --yes to remove")
		}
		fmt.Fprintln(c.m.Stderr, ")")
		return nil
	}
	fmt.Fprintf(c.m.Stderr, "mlxgo: %s: freed %s\n", what, hub.Bytes(plan.Bytes))
	return nil
}
