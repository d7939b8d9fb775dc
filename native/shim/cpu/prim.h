// prim.h — how the shim's CPU kernels become MLX graph nodes.
#pragma once

#include <string>
#include <vector>

#include "../internal.h"
#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/primitives.h"

namespace mlxgo::cpu {

// loc is MLX's elem_to_loc: the offset of the elem-th element (row-major
// order) of an array with the given shape and strides.
inline int64_t loc(int64_t elem, const mx::Shape& shape, const mx::Strides& strides) {
  int64_t l = 0;
  for (int i = int(shape.size()) - 1; i >= 0; --i) {
    l += (elem % shape[i]) * strides[i];
    elem /= shape[i];
  }
  return l;
}

// CpuPrim runs Kernel::run(params, inputs, out) on the stream's thread, as
// MLX's own CPU primitives do: allocate the output, then dispatch the work
// to the stream. The parameters travel by value: MLX may release the graph
// node, and this primitive with it, before the stream thread gets to the
// task (the inputs' buffers are kept alive by MLX until it has run).
template <class Kernel>
class CpuPrim : public mx::UnaryPrimitive {
 public:
  using Params = typename Kernel::Params;
  CpuPrim(mx::Stream s, Params p) : UnaryPrimitive(s), p_(p) {}
  const char* name() const override { return Kernel::name; }
  const Params& params() const { return p_; }
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error(std::string(Kernel::name) + " is a CPU kernel");
  }
  void eval_cpu(const std::vector<mx::array>& in, mx::array& out) override {
    out.set_data(mx::allocator::malloc(out.nbytes()));
    auto& enc = mx::cpu::get_command_encoder(stream());
    for (auto& x : in) enc.set_input_array(x);
    enc.set_output_array(out);
    std::vector<mx::array> ins;
    for (auto& x : in) ins.push_back(mx::array::unsafe_weak_copy(x));
    enc.dispatch([p = p_, ins = std::move(ins), out = mx::array::unsafe_weak_copy(out)]() mutable {
      Kernel::run(p, ins, out);
    });
  }

 private:
  Params p_;
};

// pending_node is x's node when x is the output of an unscheduled node of
// Kernel's (one a chain can absorb), else nullptr.
template <class Kernel>
const CpuPrim<Kernel>* pending_node(const mx::array& x) {
  if (!x.has_primitive() || x.status() != mx::array::Status::unscheduled) return nullptr;
  return dynamic_cast<const CpuPrim<Kernel>*>(&x.primitive());
}

// node makes the graph node of Kernel over inputs, on stream s (by default
// the thread's default CPU stream, where the op it replaces would run).
template <class Kernel>
mx::array node(mx::Shape shape, mx::Dtype dtype, typename Kernel::Params p, std::vector<mx::array> inputs,
               std::optional<mx::Stream> s = std::nullopt) {
  return mx::array(std::move(shape), dtype,
                   std::make_shared<CpuPrim<Kernel>>(s.value_or(mx::default_stream(mx::Device::cpu)), p),
                   std::move(inputs));
}

}  // namespace mlxgo::cpu
