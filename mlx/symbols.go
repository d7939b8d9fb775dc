package mlx

//go:generate go run ./internal/gendirect

import "unsafe"

// fn holds the shim's functions once Load has bound them. Each field's Go
// type is the C signature of the function of the same name in
// native/shim/mlxgo.h: int ↔ int32, size_t ↔ uintptr, const float* ↔
// *float32, const double* ↔ *float64, const char* ↔ string, mlxgo_array ↔
// uintptr, and pointers as Go pointers to memory the shim only uses during
// the call. Every signature but the two string results is bound through
// purego.SyscallN by direct.go (go generate writes it from this struct).
var fn struct {
	lastError func() string
	version   func() string

	grammarVersion        func() string
	grammarTokenizerNew   func(tokenizerJSON string, vocab int32, eos *int32, nEOS int32, out *uintptr) int32
	grammarTokenizerVocab func(lens *uint32, bytes *byte, vocab int32, eos *int32, nEOS int32, out *uintptr) int32
	grammarTokenizerFree  func(t uintptr) int32
	grammarValidate       func(t uintptr, kind string, grammar string, warning *int32) int32
	matcherNew            func(t uintptr, kind string, grammar string, out *uintptr) int32
	matcherFree           func(m uintptr) int32
	matcherClone          func(m uintptr, out *uintptr) int32
	matcherMaskWords      func(m uintptr, words *uintptr) int32
	matcherMask           func(m uintptr, dst *uint32, words uintptr) int32
	matcherConsume        func(m uintptr, token int32) int32
	matcherRollback       func(m uintptr, n int32) int32
	matcherState          func(m uintptr, accepting *int32, stopped *int32) int32
	liveArrays            func() int64
	bindThread            func() int32
	threadBound           func() int32
	arrayFree             func(a uintptr) int32
	arrayClone            func(a uintptr, out *uintptr) int32
	arrayOpName           func(a uintptr, name **byte) int32
	fromData              func(data unsafe.Pointer, nbytes uintptr, shape *int32, ndim int32, dtype int32, out *uintptr) int32
	loadBytes             func(data unsafe.Pointer, nbytes uintptr, shape *int32, ndim int32, dtype int32, out *uintptr) int32
	fromFloat             func(v *float32, dtype int32, out *uintptr) int32
	fromInt               func(v int64, dtype int32, out *uintptr) int32
	arrayInfo             func(a uintptr, dtype *int32, ndim *int32, shape *int32, cap int32) int32
	arrayToHost           func(a uintptr, dst unsafe.Pointer, nbytes uintptr) int32
	eval                  func(arrs *uintptr, n int32) int32
	asyncEval             func(arrs *uintptr, n int32) int32

	astype      func(a uintptr, dtype int32, out *uintptr) int32
	view        func(a uintptr, dtype int32, out *uintptr) int32
	arange      func(start, stop, step *float64, dtype int32, out *uintptr) int32
	zeros       func(shape *int32, n int32, dtype int32, out *uintptr) int32
	ones        func(shape *int32, n int32, dtype int32, out *uintptr) int32
	full        func(shape *int32, n int32, vals uintptr, dtype int32, out *uintptr) int32
	reshape     func(a uintptr, shape *int32, n int32, out *uintptr) int32
	transpose   func(a uintptr, axes *int32, n int32, out *uintptr) int32
	swapaxes    func(a uintptr, axis1, axis2 int32, out *uintptr) int32
	expandDims  func(a uintptr, axes *int32, n int32, out *uintptr) int32
	squeeze     func(a uintptr, axes *int32, n int32, out *uintptr) int32
	flatten     func(a uintptr, start, end int32, out *uintptr) int32
	broadcastTo func(a uintptr, shape *int32, n int32, out *uintptr) int32
	concatenate func(arrs *uintptr, n int32, axis int32, out *uintptr) int32
	stack       func(arrs *uintptr, n int32, axis int32, out *uintptr) int32
	splitEqual  func(a uintptr, num int32, axis int32, out *uintptr, cap int32) int32
	splitAt     func(a uintptr, indices *int32, n int32, axis int32, out *uintptr, cap int32) int32
	views       func(a uintptr, n int32, ndim int32, shapes *int32, strides *int64, offsets *int64, out *uintptr) int32
	slice       func(a uintptr, start, stop, strides *int32, n int32, out *uintptr) int32
	sliceDyn    func(a uintptr, start uintptr, axes *int32, naxes int32, sizes *int32, nsizes int32, out *uintptr) int32
	sliceUpdate func(src, update uintptr, start, stop, strides *int32, n int32, out *uintptr) int32
	sliceUpdDyn func(src, update, start uintptr, axes *int32, naxes int32, out *uintptr) int32
	pad         func(a uintptr, axes *int32, n int32, low, high *int32, value uintptr, mode string, out *uintptr) int32
	repeat      func(a uintptr, repeats, axis int32, out *uintptr) int32
	tril        func(a uintptr, k int32, out *uintptr) int32
	triu        func(a uintptr, k int32, out *uintptr) int32
	contiguous  func(a uintptr, out *uintptr) int32
	where       func(cond, x, y uintptr, out *uintptr) int32

	unary  map[string]*func(a uintptr, out *uintptr) int32
	binary map[string]*func(a, b uintptr, out *uintptr) int32
	reduce map[string]*func(a uintptr, axes *int32, n int32, keepdims int32, out *uintptr) int32

	clip  func(a, lo, hi uintptr, out *uintptr) int32
	addmm func(c, a, b uintptr, alpha, beta *float32, out *uintptr) int32

	variance      func(a uintptr, axes *int32, n int32, keepdims int32, ddof int32, out *uintptr) int32
	argmax        func(a uintptr, axis int32, keepdims int32, out *uintptr) int32
	argmin        func(a uintptr, axis int32, keepdims int32, out *uintptr) int32
	cumsum        func(a uintptr, axis int32, reverse, inclusive int32, out *uintptr) int32
	softmax       func(a uintptr, axes *int32, n int32, precise int32, out *uintptr) int32
	sort          func(a uintptr, axis int32, out *uintptr) int32
	argsort       func(a uintptr, axis int32, out *uintptr) int32
	partition     func(a uintptr, kth, axis int32, out *uintptr) int32
	argpartition  func(a uintptr, kth, axis int32, out *uintptr) int32
	topk          func(a uintptr, k, axis int32, out *uintptr) int32
	take          func(a, indices uintptr, axis int32, out *uintptr) int32
	takeAlongAxis func(a, indices uintptr, axis int32, out *uintptr) int32
	putAlongAxis  func(a, indices, values uintptr, axis int32, out *uintptr) int32
	gather        func(a uintptr, indices *uintptr, nidx int32, axes *int32, naxes int32, sizes *int32, nsizes int32, out *uintptr) int32

	quantize        func(w uintptr, groupSize, bits int32, mode string, globalScale uintptr, outW, outScales, outBiases *uintptr) int32
	dequantize      func(w, scales, biases uintptr, groupSize, bits int32, mode string, globalScale uintptr, hasDtype, dtype int32, out *uintptr) int32
	quantizedMatmul func(x, w, scales, biases uintptr, transpose, groupSize, bits int32, mode string, out *uintptr) int32
	gatherQMM       func(x, w, scales, biases, lhs, rhs uintptr, transpose, groupSize, bits int32, mode string, sorted int32, out *uintptr) int32
	gatherMM        func(a, b, lhs, rhs uintptr, sorted int32, out *uintptr) int32

	geluApprox   func(x uintptr, out *uintptr) int32
	swiglu       func(gate, x uintptr, out *uintptr) int32
	swigluHalves func(gu uintptr, out *uintptr) int32
	geglu        func(gate, x uintptr, out *uintptr) int32
	computeG     func(aLog, a, dtBias uintptr, out *uintptr) int32
	deltaStep    func(q, k, v, g, beta, state uintptr, out *uintptr, cap int32) int32
	softcap      func(x uintptr, softcap *float32, out *uintptr) int32
	rmsNorm      func(x, w uintptr, eps *float32, out *uintptr) int32
	layerNorm    func(x, w, b uintptr, eps *float32, out *uintptr) int32
	rope         func(x uintptr, dims, traditional, hasBase int32, base, scale *float32, offset int32, freqs uintptr, out *uintptr) int32
	ropeDynamic  func(x uintptr, dims, traditional, hasBase int32, base, scale *float32, offset, freqs uintptr, out *uintptr) int32
	sdpa         func(q, k, v uintptr, scale *float32, maskMode string, mask, sinks uintptr, out *uintptr) int32

	conv1d            func(in, w uintptr, stride, padding, dilation, groups int32, out *uintptr) int32
	fft               func(a uintptr, kind, hasN, n, axis int32, out *uintptr) int32
	randomSeed        func(seed uint64) int32
	randomKey         func(seed uint64, out *uintptr) int32
	randomSplit       func(key uintptr, num int32, out *uintptr) int32
	randomCategorical func(logits uintptr, axis, hasNum, num int32, key uintptr, out *uintptr) int32
	randomUniform     func(low, high uintptr, shape *int32, n int32, dtype int32, key uintptr, out *uintptr) int32
	randomNormal      func(shape *int32, n int32, dtype int32, loc, scale *float32, key uintptr, out *uintptr) int32
	randomBernoulli   func(p uintptr, shape *int32, n int32, key uintptr, out *uintptr) int32

	defaultDevice    func(typ, index *int32) int32
	setDefaultDevice func(typ, index int32) int32
	deviceAvailable  func(typ int32, out *int32) int32
	deviceCount      func(typ int32, out *int32) int32
	deviceInfo       func(typ, index int32, out **byte) int32
	backends         func(metal, cuda *int32) int32
	defaultStream    func(typ, index int32, stream *int32) int32
	newStream        func(typ, index int32, stream *int32) int32
	setDefaultStream func(stream, typ, index int32) int32
	synchronize      func(hasStream, stream, typ, index int32) int32
	memoryActive     func(out *uintptr) int32
	memoryPeak       func(out *uintptr) int32
	memoryResetPeak  func() int32
	memoryCache      func(out *uintptr) int32
	memoryLimit      func(out *uintptr) int32
	setMemoryLimit   func(limit uintptr, prev *uintptr) int32
	setCacheLimit    func(limit uintptr, prev *uintptr) int32
	setWiredLimit    func(limit uintptr, prev *uintptr) int32
	clearCache       func() int32

	cpuKernelsSet    func(mode, threads int32, isa string) int32
	cpuSelftest      func(what string, stride uint64, checked, mismatches *uint64) int32
	cpuKernelsInfo   func(mode, threads *int32, isa **byte) int32
	cpuPackQWeight   func(w, scales, biases uintptr, groupSize, bits int32, out *uintptr) int32
	cpuPackedQmm     func(x, packed uintptr, n, k, groupSize, bits, dtype int32, out *uintptr) int32
	cpuPackedQmmAdd  func(x, packed uintptr, n, k, groupSize, bits, dtype int32, res uintptr, out *uintptr) int32
	cpuNormPackedQmm func(x, w uintptr, eps *float32, packed uintptr, n, k, groupSize, bits, dtype int32, out *uintptr) int32
	cpuPackedMLP     func(x, w uintptr, eps *float32, gateUp, down uintptr, hidden, width, guGroupSize, guBits, guDtype, dGroupSize, dBits, dDtype int32, res uintptr, out *uintptr) int32
	cpuCacheWrite    func(buf, x uintptr, offset, keep, capacity, transposed int32, rope *cRopeSpec, out *uintptr) int32
	cpuCacheAttend   func(q, kbuf, vbuf uintptr, length int32, rope *cRopeSpec, scale *float32, causal int32, mask uintptr, out *uintptr) int32
	cpuPackedEmbed   func(ids, packed uintptr, n, k, groupSize, bits, dtype int32, out *uintptr) int32

	distIsAvailable func(backend string, out *int32) int32
	distInit        func(strict int32, backend string, out *uintptr) int32
	groupFree       func(g uintptr) int32
	groupRank       func(g uintptr, out *int32) int32
	groupSize       func(g uintptr, out *int32) int32
	groupSplit      func(g uintptr, color, key int32, out *uintptr) int32
	allSum          func(x, g uintptr, out *uintptr) int32
	allGather       func(x, g uintptr, out *uintptr) int32
	allMax          func(x, g uintptr, out *uintptr) int32
	allMin          func(x, g uintptr, out *uintptr) int32
	sumScatter      func(x, g uintptr, out *uintptr) int32
	send            func(x uintptr, dst int32, g uintptr, out *uintptr) int32
	recv            func(shape *int32, n, dtype, src int32, g uintptr, out *uintptr) int32
	recvLike        func(x uintptr, src int32, g uintptr, out *uintptr) int32
	depends         func(x, dep uintptr, out *uintptr) int32
}

// Elementwise ops and reductions share one C signature each; they are bound
// by name into maps so that adding one is a line here and a line in the shim.
var (
	unaryNames = []string{"negative", "exp", "log", "log1p", "sqrt", "rsqrt", "square", "abs",
		"sin", "cos", "tanh", "sigmoid", "erf", "floor", "ceil", "reciprocal", "logical_not",
		"real", "imag", "stop_gradient"}
	binaryNames = []string{"add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
		"remainder", "floor_divide", "equal", "not_equal", "less", "less_equal", "greater",
		"greater_equal", "logical_and", "logical_or", "matmul"}
	reduceNames = []string{"sum", "mean", "max", "min", "prod", "logsumexp", "all", "any"}
)

// symbol pairs a C name with the Go function variable it binds.
type symbol struct {
	name string
	ptr  any // pointer to a func variable
}

// symbols is the one table of everything Load binds. Load checks that every
// name resolves before binding any, and names all that do not.
func symbols() []symbol {
	s := []symbol{
		{"mlxgo_last_error", &fn.lastError},
		{"mlxgo_version", &fn.version},
		{"mlxgo_grammar_version", &fn.grammarVersion},
		{"mlxgo_grammar_tokenizer_new", &fn.grammarTokenizerNew},
		{"mlxgo_grammar_tokenizer_from_vocab", &fn.grammarTokenizerVocab},
		{"mlxgo_grammar_tokenizer_free", &fn.grammarTokenizerFree},
		{"mlxgo_grammar_validate", &fn.grammarValidate},
		{"mlxgo_matcher_new", &fn.matcherNew},
		{"mlxgo_matcher_free", &fn.matcherFree},
		{"mlxgo_matcher_clone", &fn.matcherClone},
		{"mlxgo_matcher_mask_words", &fn.matcherMaskWords},
		{"mlxgo_matcher_mask", &fn.matcherMask},
		{"mlxgo_matcher_consume", &fn.matcherConsume},
		{"mlxgo_matcher_rollback", &fn.matcherRollback},
		{"mlxgo_matcher_state", &fn.matcherState},
		{"mlxgo_live_arrays", &fn.liveArrays},
		{"mlxgo_bind_thread", &fn.bindThread},
		{"mlxgo_thread_bound", &fn.threadBound},
		{"mlxgo_array_free", &fn.arrayFree},
		{"mlxgo_array_clone", &fn.arrayClone},
		{"mlxgo_array_op_name", &fn.arrayOpName},
		{"mlxgo_array_from_data", &fn.fromData},
		{"mlxgo_array_load_bytes", &fn.loadBytes},
		{"mlxgo_array_from_float", &fn.fromFloat},
		{"mlxgo_array_from_int", &fn.fromInt},
		{"mlxgo_array_info", &fn.arrayInfo},
		{"mlxgo_array_to_host", &fn.arrayToHost},
		{"mlxgo_eval", &fn.eval},
		{"mlxgo_async_eval", &fn.asyncEval},

		{"mlxgo_astype", &fn.astype},
		{"mlxgo_view", &fn.view},
		{"mlxgo_arange", &fn.arange},
		{"mlxgo_zeros", &fn.zeros},
		{"mlxgo_ones", &fn.ones},
		{"mlxgo_full", &fn.full},
		{"mlxgo_reshape", &fn.reshape},
		{"mlxgo_transpose", &fn.transpose},
		{"mlxgo_swapaxes", &fn.swapaxes},
		{"mlxgo_expand_dims", &fn.expandDims},
		{"mlxgo_squeeze", &fn.squeeze},
		{"mlxgo_flatten", &fn.flatten},
		{"mlxgo_broadcast_to", &fn.broadcastTo},
		{"mlxgo_concatenate", &fn.concatenate},
		{"mlxgo_stack", &fn.stack},
		{"mlxgo_split_equal", &fn.splitEqual},
		{"mlxgo_split_at", &fn.splitAt},
		{"mlxgo_views", &fn.views},
		{"mlxgo_slice", &fn.slice},
		{"mlxgo_slice_dynamic", &fn.sliceDyn},
		{"mlxgo_slice_update", &fn.sliceUpdate},
		{"mlxgo_slice_update_dynamic", &fn.sliceUpdDyn},
		{"mlxgo_pad", &fn.pad},
		{"mlxgo_repeat", &fn.repeat},
		{"mlxgo_tril", &fn.tril},
		{"mlxgo_triu", &fn.triu},
		{"mlxgo_contiguous", &fn.contiguous},
		{"mlxgo_where", &fn.where},

		{"mlxgo_clip", &fn.clip},
		{"mlxgo_addmm", &fn.addmm},
		{"mlxgo_var", &fn.variance},
		{"mlxgo_argmax", &fn.argmax},
		{"mlxgo_argmin", &fn.argmin},
		{"mlxgo_cumsum", &fn.cumsum},
		{"mlxgo_softmax", &fn.softmax},
		{"mlxgo_sort", &fn.sort},
		{"mlxgo_argsort", &fn.argsort},
		{"mlxgo_partition", &fn.partition},
		{"mlxgo_argpartition", &fn.argpartition},
		{"mlxgo_topk", &fn.topk},
		{"mlxgo_take", &fn.take},
		{"mlxgo_take_along_axis", &fn.takeAlongAxis},
		{"mlxgo_put_along_axis", &fn.putAlongAxis},
		{"mlxgo_gather", &fn.gather},

		{"mlxgo_quantize", &fn.quantize},
		{"mlxgo_dequantize", &fn.dequantize},
		{"mlxgo_quantized_matmul", &fn.quantizedMatmul},
		{"mlxgo_gather_qmm", &fn.gatherQMM},
		{"mlxgo_gather_mm", &fn.gatherMM},

		{"mlxgo_gelu_approx", &fn.geluApprox},
		{"mlxgo_swiglu", &fn.swiglu},
		{"mlxgo_swiglu_halves", &fn.swigluHalves},
		{"mlxgo_geglu", &fn.geglu},
		{"mlxgo_compute_g", &fn.computeG},
		{"mlxgo_gated_delta_step", &fn.deltaStep},
		{"mlxgo_logit_softcap", &fn.softcap},
		{"mlxgo_fast_rms_norm", &fn.rmsNorm},
		{"mlxgo_fast_layer_norm", &fn.layerNorm},
		{"mlxgo_fast_rope", &fn.rope},
		{"mlxgo_fast_rope_dynamic", &fn.ropeDynamic},
		{"mlxgo_fast_sdpa", &fn.sdpa},

		{"mlxgo_conv1d", &fn.conv1d},
		{"mlxgo_fft", &fn.fft},
		{"mlxgo_random_seed", &fn.randomSeed},
		{"mlxgo_random_key", &fn.randomKey},
		{"mlxgo_random_split", &fn.randomSplit},
		{"mlxgo_random_categorical", &fn.randomCategorical},
		{"mlxgo_random_uniform", &fn.randomUniform},
		{"mlxgo_random_normal", &fn.randomNormal},
		{"mlxgo_random_bernoulli", &fn.randomBernoulli},

		{"mlxgo_default_device", &fn.defaultDevice},
		{"mlxgo_set_default_device", &fn.setDefaultDevice},
		{"mlxgo_device_available", &fn.deviceAvailable},
		{"mlxgo_device_count", &fn.deviceCount},
		{"mlxgo_device_info", &fn.deviceInfo},
		{"mlxgo_backends", &fn.backends},
		{"mlxgo_default_stream", &fn.defaultStream},
		{"mlxgo_new_stream", &fn.newStream},
		{"mlxgo_set_default_stream", &fn.setDefaultStream},
		{"mlxgo_synchronize", &fn.synchronize},
		{"mlxgo_memory_active", &fn.memoryActive},
		{"mlxgo_memory_peak", &fn.memoryPeak},
		{"mlxgo_memory_reset_peak", &fn.memoryResetPeak},
		{"mlxgo_memory_cache", &fn.memoryCache},
		{"mlxgo_memory_limit", &fn.memoryLimit},
		{"mlxgo_set_memory_limit", &fn.setMemoryLimit},
		{"mlxgo_set_cache_limit", &fn.setCacheLimit},
		{"mlxgo_set_wired_limit", &fn.setWiredLimit},
		{"mlxgo_clear_cache", &fn.clearCache},

		{"mlxgo_cpu_kernels_set", &fn.cpuKernelsSet},
		{"mlxgo_cpu_selftest", &fn.cpuSelftest},
		{"mlxgo_cpu_kernels_info", &fn.cpuKernelsInfo},
		{"mlxgo_cpu_pack_qweight", &fn.cpuPackQWeight},
		{"mlxgo_cpu_packed_qmm", &fn.cpuPackedQmm},
		{"mlxgo_cpu_packed_qmm_add", &fn.cpuPackedQmmAdd},
		{"mlxgo_cpu_norm_packed_qmm", &fn.cpuNormPackedQmm},
		{"mlxgo_cpu_packed_mlp", &fn.cpuPackedMLP},
		{"mlxgo_cpu_cache_write", &fn.cpuCacheWrite},
		{"mlxgo_cpu_cache_attend", &fn.cpuCacheAttend},
		{"mlxgo_cpu_packed_embed", &fn.cpuPackedEmbed},

		{"mlxgo_distributed_is_available", &fn.distIsAvailable},
		{"mlxgo_distributed_init", &fn.distInit},
		{"mlxgo_group_free", &fn.groupFree},
		{"mlxgo_group_rank", &fn.groupRank},
		{"mlxgo_group_size", &fn.groupSize},
		{"mlxgo_group_split", &fn.groupSplit},
		{"mlxgo_all_sum", &fn.allSum},
		{"mlxgo_all_gather", &fn.allGather},
		{"mlxgo_all_max", &fn.allMax},
		{"mlxgo_all_min", &fn.allMin},
		{"mlxgo_sum_scatter", &fn.sumScatter},
		{"mlxgo_send", &fn.send},
		{"mlxgo_recv", &fn.recv},
		{"mlxgo_recv_like", &fn.recvLike},
		{"mlxgo_depends", &fn.depends},
	}
	fn.unary = map[string]*func(uintptr, *uintptr) int32{}
	for _, n := range unaryNames {
		f := new(func(uintptr, *uintptr) int32)
		fn.unary[n] = f
		s = append(s, symbol{"mlxgo_" + n, f})
	}
	fn.binary = map[string]*func(uintptr, uintptr, *uintptr) int32{}
	for _, n := range binaryNames {
		f := new(func(uintptr, uintptr, *uintptr) int32)
		fn.binary[n] = f
		s = append(s, symbol{"mlxgo_" + n, f})
	}
	fn.reduce = map[string]*func(uintptr, *int32, int32, int32, *uintptr) int32{}
	for _, n := range reduceNames {
		f := new(func(uintptr, *int32, int32, int32, *uintptr) int32)
		fn.reduce[n] = f
		s = append(s, symbol{"mlxgo_" + n, f})
	}
	return s
}
