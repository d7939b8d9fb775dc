package mlx

// MLX's distributed layer (mlx::core::distributed): a Group is the set of
// processes a launcher started — `mlxgo launch` or `mlx.launch`, which hand
// each process its rank and peers in the environment (ring: MLX_RANK and
// MLX_HOSTFILE) — and the collectives run over MLX's own transport. Like
// every op they are lazy and run on the executor; a peer that is gone is an
// error at Eval ("[ring] connection to a peer was lost"), never a hang
// inside this package.

// DistributedBackends are the backends MLX knows, in its "any" order.
var DistributedBackends = []string{"mpi", "ring", "nccl", "jaccl"}

// DistributedAvailable (on the executor) reports whether MLX was built with backend ("" or
// "any": with any backend). mpi is available only when libmpi loads at run
// time; nccl only in a CUDA build.
func DistributedAvailable(backend string) (bool, error) {
	if !loaded.Load() {
		return false, ErrNotLoaded
	}
	var v int32
	if err := check("distributed_is_available", fn.distIsAvailable(backend, &v)); err != nil {
		return false, err
	}
	return v != 0, nil
}

// Group is a communication group. Its native handle is released by Free;
// a group of size 1 makes every collective the identity.
type Group struct {
	h          uintptr
	rank, size int
	backend    string
}

// InitDistributed joins the group the environment describes over backend
// ("any" or "" picks the first available). strict makes a backend that
// cannot start an error; otherwise such a process is a group of one.
func InitDistributed(strict bool, backend string) (*Group, error) {
	const op = "distributed_init"
	if !loaded.Load() {
		return nil, ErrNotLoaded
	}
	var h uintptr
	if err := check(op, fn.distInit(flag(strict), backend, &h)); err != nil {
		return nil, err
	}
	return newGroup(h, backend)
}

func newGroup(h uintptr, backend string) (*Group, error) {
	g := &Group{h: h, backend: backend}
	var r, s int32
	if err := check("group_rank", fn.groupRank(h, &r)); err != nil {
		fn.groupFree(h)
		return nil, err
	}
	if err := check("group_size", fn.groupSize(h, &s)); err != nil {
		fn.groupFree(h)
		return nil, err
	}
	g.rank, g.size = int(r), int(s)
	return g, nil
}

// Rank is this process's index in the group, Size the group's size.
func (g *Group) Rank() int { return g.rank }
func (g *Group) Size() int { return g.size }

// Backend is the name the group was initialized with ("any" when unnamed).
func (g *Group) Backend() string {
	if g.backend == "" {
		return "any"
	}
	return g.backend
}

// Split makes the subgroup of the processes that pass the same color; key
// orders ranks within it (negative: by rank in g).
func (g *Group) Split(color, key int) (*Group, error) {
	var h uintptr
	if err := check("group_split", fn.groupSplit(g.h, int32(color), int32(key), &h)); err != nil {
		return nil, err
	}
	return newGroup(h, g.backend)
}

// Free releases the native handle; the group itself lives on in MLX's cache.
func (g *Group) Free() {
	if g != nil && g.h != 0 {
		fn.groupFree(g.h)
		g.h = 0
	}
}

func (g *Group) handle() uintptr {
	if g == nil {
		return 0 // MLX's global group
	}
	return g.h
}

func collective(op string, f func(uintptr, uintptr, *uintptr) int32, x *Array, g *Group) *Array {
	c := begin(op)
	h := c.in(x)
	return c.do(func(out *uintptr) int32 { return f(h, g.handle(), out) })
}

// AllSum is the elementwise sum of x over every rank of g (nil: the global group).
func AllSum(x *Array, g *Group) *Array { return collective("all_sum", fn.allSum, x, g) }

// shareHead is how many int32s Share's first all_sum carries: the count and
// the first values, so that a short message costs one collective.
const shareHead = 64

// Share hands rank 0's values to every rank of g with MLX's all_sum (the
// other ranks contribute zeros): one collective for up to shareHead-1
// values, a second for the rest. Only rank 0's data is read; every rank
// gets it back. It evaluates, so it must run on the MLX executor.
func Share(data []int32, g *Group) ([]int32, error) {
	s := NewScope()
	defer s.Close()
	lead := g.Rank() == 0
	head := make([]int32, shareHead)
	if lead {
		head[0] = int32(len(data))
		copy(head[1:], data)
	}
	got, err := AllSum(FromSlice(head, shareHead), g).Int32s()
	if err != nil {
		return nil, err
	}
	n := int(got[0])
	out := make([]int32, n)
	copy(out, got[1:])
	if n > shareHead-1 {
		rest := make([]int32, n-(shareHead-1))
		if lead {
			copy(rest, data[shareHead-1:])
		}
		if rest, err = AllSum(FromSlice(rest, len(rest)), g).Int32s(); err != nil {
			return nil, err
		}
		copy(out[shareHead-1:], rest)
	}
	return out, nil
}

// AllGather concatenates every rank's x along axis 0, in rank order.
func AllGather(x *Array, g *Group) *Array { return collective("all_gather", fn.allGather, x, g) }

// AllMax and AllMin are the elementwise maximum and minimum over the ranks.
func AllMax(x *Array, g *Group) *Array { return collective("all_max", fn.allMax, x, g) }
func AllMin(x *Array, g *Group) *Array { return collective("all_min", fn.allMin, x, g) }

// SumScatter sums over the ranks and leaves rank r the r-th slice along axis 0.
func SumScatter(x *Array, g *Group) *Array { return collective("sum_scatter", fn.sumScatter, x, g) }

// Send sends x to rank dst when the result is evaluated.
func Send(x *Array, dst int, g *Group) *Array {
	c := begin("send")
	h := c.in(x)
	return c.do(func(out *uintptr) int32 { return fn.send(h, int32(dst), g.handle(), out) })
}

// Recv receives an array of shape and dtype from rank src.
func Recv(shape []int, dtype Dtype, src int, g *Group) *Array {
	c := begin("recv")
	s := i32s(shape)
	return c.do(func(out *uintptr) int32 {
		return fn.recv(ptr32(s), int32(len(s)), int32(dtype), int32(src), g.handle(), out)
	})
}

// RecvLike receives an array shaped and typed like x from rank src.
func RecvLike(x *Array, src int, g *Group) *Array {
	c := begin("recv_like")
	h := c.in(x)
	return c.do(func(out *uintptr) int32 { return fn.recvLike(h, int32(src), g.handle(), out) })
}

// Depends is mx.depends for one array: x's value, evaluated only after dep
// (a send whose result nothing else reads).
func Depends(x, dep *Array) *Array {
	c := begin("depends")
	hx, hd := c.in(x), c.in(dep)
	return c.do(func(out *uintptr) int32 { return fn.depends(hx, hd, out) })
}
