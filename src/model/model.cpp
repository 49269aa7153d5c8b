#include "model/model.hpp"

#include "kernels/embedding.hpp"

namespace minilst {

template <class T>
double Model<T>::forward_backward(const ParamSet<T>& params, const ParamSet<T>& grads,
                                  const Vec<const std::int64_t>& tokens,
                                  const Vec<const std::int64_t>& labels, double grad_scale) const {
  const std::size_t S = tokens.extent(0), d = cfg_.hidden;
  const int L = cfg_.layers;
  const bool checkpoint = opts_.policy == MemoryPolicy::checkpoint;

  // x[l]: input of layer l (the residual stream), x[L]: input of the final norm.
  std::vector<Tracked<Mat<T>>> x(L + 1);
  std::vector<SavedLayer<T>> saved(L);
  double loss_sum = 0;
  Tracked<Mat<T>> dx("x_grad", MemCategory::workspace, S, d);
  {
    ScopedPhase phase(timers_, "forward");
    for (int l = 0; l <= L; ++l) x[l] = Tracked<Mat<T>>("x" + std::to_string(l), MemCategory::activations, S, d);
    kernels::embedding_forward<T>(x[0].view(), tokens, params.embed);
    for (int l = 0; l < L; ++l) {
      layer_.forward_attention(saved[l], x[l].view(), params.layers[l]);
      layer_.forward_mlp(x[l + 1].view(), saved[l].y.view(), params.layers[l]);
      if (checkpoint) saved[l].reset();
    }
    loss_sum = head_.forward_backward(dx.view(), x[L].view(), labels, params, grads, grad_scale);
    x[L].reset();
  }
  {
    ScopedPhase phase(timers_, "backward");
    Tracked<Mat<T>> dx_in("x_grad_in", MemCategory::workspace, S, d);
    for (int l = L - 1; l >= 0; --l) {
      if (checkpoint) {
        ScopedPhase recompute(timers_, "recompute");
        layer_.forward_attention(saved[l], x[l].view(), params.layers[l]);
      }
      layer_.backward(dx_in.view(), grads.layers[l], dx.view(), saved[l], x[l].view(), params.layers[l]);
      saved[l].reset();
      x[l].reset();
      std::swap(dx, dx_in);  // dx := gradient w.r.t. this layer's input
    }
    kernels::embedding_backward<T>(grads.embed, tokens, dx.view());
  }
  return loss_sum;
}

template class Model<float>;
template class Model<double>;

}  // namespace minilst
