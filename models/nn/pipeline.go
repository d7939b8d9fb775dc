package nn

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// Pipeline parallelism as mlx-lm's PipelineMixin (models/pipeline.py) does
// it: rank r of N runs a contiguous run of the layers, in reverse rank
// order: the last rank runs the first layers, rank 0 the last ones. The
// layers split evenly, the low ranks taking one more when they do not
// divide (rank r has layers/N + (r < layers%N)), and rank r's run starts
// after those of ranks r+1 … N-1. A rank other than the last receives the
// hidden state from rank r+1 instead of embedding the tokens, each rank
// but 0 sends its output to rank r-1, and rank 0's output is all-gathered
// so every rank has it (and computes the same logits). Embeddings, the
// final norm and the head are on every rank; a rank loads only its own
// layers' tensors and keeps a cache for its own layers only.

// Stage is this process's place in a pipeline-parallel group.
type Stage struct {
	Group      *mlx.Group
	Rank, Size int
	// Start and End are the model layers this rank runs, [Start, End):
	// set by Weights.Stage once the architecture knows its layer count.
	Start, End int

	taken bool
}

// Taken reports whether the architecture loaded under WithStage split its
// layers; one without a PipelineMixin in mlx-lm loads whole.
func (s *Stage) Taken() bool { return s != nil && s.taken }

// staging is the stage of the load under way (WithStage), as loading is
// the tensor shard's.
var staging *Stage

// WithStage runs load with s as the stage every architecture sees through
// Weights.Stage; s nil or of size 1 is no pipeline.
func WithStage(s *Stage, load func() error) error {
	if s != nil && s.Size <= 1 {
		s = nil
	}
	staging = s
	defer func() { staging = nil }()
	return load()
}

// PipelineSplit is PipelineMixin.pipeline's default split: layers per rank,
// rank r's entry first.
func PipelineSplit(layers, size int) []int {
	base, extra := layers/size, layers%size
	out := make([]int, size)
	for r := range out {
		out[r] = base
		if r < extra {
			out[r]++
		}
	}
	return out
}

var layerNumber = regexp.MustCompile(`(?:^|\.)layers\.(\d+)\.`)

// Stage is the pipeline stage of this load, nil when the model is whole.
// An architecture with a PipelineMixin in mlx-lm calls it with its layer
// count before taking its layers: it fixes the rank's [Start, End) and drops
// every other layer's tensors (named "….layers.N.…", as sharded_load matches
// them), so they are never read.
func (ws *Weights) Stage(layers int) *Stage {
	s := staging
	if s == nil || ws.err != nil {
		return nil
	}
	if layers < s.Size {
		ws.Fail(fmt.Errorf("cannot split %d layers over %d pipeline ranks (every rank needs a layer)", layers, s.Size))
		return nil
	}
	split := PipelineSplit(layers, s.Size)
	s.Start = 0
	for _, n := range split[s.Rank+1:] {
		s.Start += n
	}
	s.End = s.Start + split[s.Rank]
	s.taken = true
	ws.Drop(func(name string) bool {
		m := layerNumber.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		i, err := strconv.Atoi(m[1])
		return err == nil && (i < s.Start || i >= s.End)
	})
	return s
}

// Has reports whether layer i (a model layer number) is this rank's; every
// layer is when s is nil.
func (s *Stage) Has(i int) bool { return s == nil || (i >= s.Start && i < s.End) }

// Enter is the hidden state this rank's first layer takes: h (the
// embedded tokens) on the last rank, else what rank r+1 sends (recv_like).
func (s *Stage) Enter(h *mlx.Array) *mlx.Array {
	if s == nil || s.Rank == s.Size-1 {
		return h
	}
	return mlx.RecvLike(h, s.Rank+1, s.Group)
}

// Leave hands this rank's output on: every rank but 0 sends it to rank r-1
// (its last layer's cache depends on the send, so evaluating the caches
// sends it), then rank 0's output is gathered onto every rank
// (all_gather(h)[:B]).
func (s *Stage) Leave(h *mlx.Array, last kv.Cache) *mlx.Array {
	if s == nil {
		return h
	}
	if s.Rank != 0 {
		h = mlx.Send(h, (s.Rank-1+s.Size)%s.Size, s.Group)
		if last != nil {
			kv.DependOn(last, h)
		}
	}
	b := h.Dim(0)
	g := mlx.AllGather(h, s.Group)
	sh := g.Shape()
	start, stop := make([]int, len(sh)), append([]int(nil), sh...)
	stop[0] = b
	return mlx.Slice(g, start, stop)
}
