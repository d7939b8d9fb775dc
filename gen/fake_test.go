package gen

import (
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// fakeModel is a one-layer attention "model" over a random embedding table:
// small, but it reads and writes a real kv cache, so the output depends on
// every token fed so far and on the cache holding them in order. It records
// each Forward call as the oracle's Recorder does.
type fakeModel struct {
	emb   *mlx.Array // [vocab, dim], float32
	vocab int
	calls []fakeCall
}

type fakeCall struct {
	tokens []int32 // the ids fed
	offset int     // cache offset before the call
	caches []string
}

// newFakeModel must be called outside any scope: the model frees its table.
func newFakeModel(vocab, dim int, seed uint64) *fakeModel {
	emb := mlx.Normal([]int{vocab, dim}, mlx.Float32, 0, 1, mlx.Key(seed))
	if err := mlx.Eval(emb); err != nil {
		panic(err) // a test helper; the executor is loaded by then
	}
	return &fakeModel{emb: emb, vocab: vocab}
}

func (f *fakeModel) free() { f.emb.Free() }

func (f *fakeModel) NewCaches(o kv.Options) []kv.Cache {
	if o.MaxKVSize > 0 {
		return []kv.Cache{kv.NewRotating(o.MaxKVSize, 4)}
	}
	return []kv.Cache{kv.NewKVCache()}
}

func (f *fakeModel) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	ids, _ := tokens.Int32s()
	call := fakeCall{tokens: ids, offset: caches[0].Offset()}
	for _, c := range caches {
		switch c.(type) {
		case *kv.KVCache:
			call.caches = append(call.caches, "KVCache")
		case *kv.Quantized:
			call.caches = append(call.caches, "QuantizedKVCache")
		case *kv.Rotating:
			call.caches = append(call.caches, "RotatingKVCache")
		}
	}
	f.calls = append(f.calls, call)

	l := tokens.Dim(1)
	x := mlx.Take(f.emb, mlx.Reshape(tokens, l), 0) // [L, D]
	d := x.Dim(1)
	// Distinct arrays for q, k and v: a cache takes ownership of k and v.
	q, k, v := mlx.Reshape(x, 1, 1, l, d), mlx.Reshape(x, 1, 1, l, d), mlx.Negative(mlx.Reshape(x, 1, 1, l, d))
	mask := kv.AttentionMask(l, caches[0], 0)
	out := kv.Attention(caches[0], q, k, v, 1, mask) // [1, 1, L, D]
	out = mlx.Add(mlx.Reshape(out, 1, l, d), mlx.Reshape(x, 1, l, d))
	return mlx.Matmul(out, mlx.Transpose(f.emb, 1, 0)) // [1, L, V]
}
