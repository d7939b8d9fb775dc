// views.cpp — several strided views of one array as one graph node.
//
// A decoder layer cuts its fused q/k/v projection into heads with nine view
// ops (three slices, three reshapes, three transposes). Views move no data,
// but each is a graph node, and MLX's CPU scheduling costs about 3 us per
// node whatever it does (SmolLM2 decode, Intel Xeon: ten extra reshapes a
// layer took 87 tok/s to 80). MlxgoViews makes all the views at once: its
// outputs share the input's buffer at the given strides and offsets, as
// MLX's own view primitives do, so every element is the same one.
#include <cstring>

#include "cpu/prim.h"
#include "mlx/backend/common/utils.h"

namespace mlxgo::cpu {
namespace {

class Views : public mx::Primitive {
 public:
  Views(mx::Stream s, std::vector<mx::Strides> strides, std::vector<int64_t> offsets)
      : Primitive(s), strides_(std::move(strides)), offsets_(std::move(offsets)) {}
  const char* name() const override { return "MlxgoViews"; }
  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("MlxgoViews is a CPU op");
  }
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& outs) override {
    const mx::array& x = in[0];
    // The strides index x's elements in row-major order: a row-contiguous x
    // is its own buffer; any other layout is first copied to one, as MLX's
    // reshape does.
    mx::array src = x;
    if (!x.flags().row_contiguous) {
      src = mx::array(x.shape(), x.dtype(), nullptr, {});
      src.set_data(mx::allocator::malloc(src.nbytes()));
      auto& enc = mx::cpu::get_command_encoder(stream());
      enc.set_input_array(x);
      enc.set_output_array(src);
      enc.dispatch([x = mx::array::unsafe_weak_copy(x), dst = mx::array::unsafe_weak_copy(src)]() mutable {
        const size_t es = x.itemsize();
        const auto* s = static_cast<const uint8_t*>(x.data<void>());
        auto* d = static_cast<uint8_t*>(dst.data<void>());
        for (size_t e = 0; e < x.size(); e++) std::memcpy(d + e * es, s + loc(int64_t(e), x.shape(), x.strides()) * es, es);
      });
    }
    for (size_t i = 0; i < outs.size(); i++) {
      mx::array& o = outs[i];
      const mx::Strides& st = strides_[i];
      auto [no_bcast, row, col] = mx::check_contiguity(o.shape(), st);
      // data_size: the elements from the first to the last one addressed.
      size_t span = o.size() == 0 ? 0 : 1;
      for (int d = 0; d < o.ndim() && o.size() > 0; d++) span += size_t(o.shape(d) - 1) * size_t(st[d]);
      mx::array::Flags f{};
      f.row_contiguous = row;
      f.col_contiguous = col;
      f.contiguous = (row || col) && no_bcast == span;
      o.copy_shared_buffer(src, st, f, span, offsets_[i]);
    }
  }

 private:
  std::vector<mx::Strides> strides_;
  std::vector<int64_t> offsets_;
};

}  // namespace

// views returns x's elements at offsets[i] + sum(index * strides[i]) (in
// elements of x in row-major order) as arrays of shapes[i]; every view must
// stay inside x, with non-negative strides.
std::vector<mx::array> views(const mx::array& x, const std::vector<mx::Shape>& shapes,
                             const std::vector<mx::Strides>& strides, const std::vector<int64_t>& offsets) {
  if (shapes.empty() || shapes.size() != strides.size() || shapes.size() != offsets.size())
    throw std::invalid_argument("views: as many shapes, strides and offsets, at least one");
  for (size_t i = 0; i < shapes.size(); i++) {
    if (shapes[i].size() != strides[i].size())
      throw std::invalid_argument("views: view " + std::to_string(i) + " has " + std::to_string(shapes[i].size()) +
                                  " dims and " + std::to_string(strides[i].size()) + " strides");
    int64_t last = offsets[i];
    bool empty = false;
    for (size_t d = 0; d < shapes[i].size(); d++) {
      if (shapes[i][d] < 0 || strides[i][d] < 0) throw std::invalid_argument("views: negative size or stride");
      if (shapes[i][d] == 0) empty = true;
      else last += int64_t(shapes[i][d] - 1) * strides[i][d];
    }
    if (offsets[i] < 0 || (!empty && last >= int64_t(x.size())))
      throw std::invalid_argument("views: view " + std::to_string(i) + " reaches past the array's " +
                                  std::to_string(x.size()) + " elements");
  }
  std::vector<mx::Dtype> dtypes(shapes.size(), x.dtype());
  return mx::array::make_arrays(shapes, dtypes,
                                std::make_shared<Views>(mx::default_stream(mx::Device::cpu), strides, offsets), {x});
}

}  // namespace mlxgo::cpu

extern "C" int mlxgo_views(mlxgo_array a, int n, int ndim, const int* shapes, const int64_t* strides,
                           const int64_t* offsets, mlxgo_array* out) {
  MLXGO_BEGIN
  if (n <= 0 || ndim < 0) throw shim::ArgError("views: need at least one view and ndim >= 0");
  shim::check_n(shapes, n * ndim, "shapes");
  shim::check_n(strides, n * ndim, "strides");
  shim::check_n(offsets, n, "offsets");
  std::vector<mx::Shape> sh(n);
  std::vector<mx::Strides> st(n);
  std::vector<int64_t> off(offsets, offsets + n);
  for (int i = 0; i < n; i++) {
    sh[i] = mx::Shape(shapes + i * ndim, shapes + (i + 1) * ndim);
    st[i] = mx::Strides(strides + i * ndim, strides + (i + 1) * ndim);
  }
  shim::put_all(mlxgo::cpu::views(shim::arr(a), sh, st, off), out, n);
  MLXGO_END
}
