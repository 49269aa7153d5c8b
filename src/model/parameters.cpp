#include "model/parameters.hpp"

#include <functional>
#include <random>

#include "kernels/bf16.hpp"

namespace minilst {

std::vector<TensorSlot> parameter_layout(const ModelConfig& c) {
  const std::size_t d = c.hidden, hq = std::size_t(c.heads) * c.head_dim(),
                    hk = std::size_t(c.kv_heads) * c.head_dim(), I = c.intermediate, V = c.vocab;
  std::vector<TensorSlot> slots;
  std::size_t offset = 0;
  auto add = [&](std::string name, std::vector<std::size_t> shape) {
    slots.push_back({std::move(name), std::move(shape), offset});
    offset += slots.back().size();
  };
  add("embed", {V, d});
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add(p + "attn_norm", {d});
    add(p + "wq", {d, hq});
    add(p + "wk", {d, hk});
    add(p + "wv", {d, hk});
    add(p + "wo", {hq, d});
    add(p + "mlp_norm", {d});
    add(p + "w_gate", {d, I});
    add(p + "w_up", {d, I});
    add(p + "w_down", {I, d});
  }
  add("final_norm", {d});
  add("lm_head", {d, V});
  return slots;
}

std::size_t parameter_count(const ModelConfig& cfg) {
  const auto slots = parameter_layout(cfg);
  return slots.back().offset + slots.back().size();
}

template <class T>
ParamSet<T>::ParamSet(const ModelConfig& cfg, const std::string& label, MemCategory category)
    : storage_(label, category, parameter_count(cfg)), slots_(parameter_layout(cfg)) {
  T* base = storage_.view().data();
  if (base == nullptr) return;  // a replay's buffer (memory_context.hpp): a size, no tensors
  std::size_t next = 0;  // slots_ are visited in layout order
  auto vec = [&]() { const auto& s = slots_[next++]; return Vec<T>(base + s.offset, s.shape[0]); };
  auto mat = [&]() {
    const auto& s = slots_[next++];
    return Mat<T>(base + s.offset, s.shape[0], s.shape[1]);
  };
  embed = mat();
  layers.resize(cfg.layers);
  for (auto& w : layers) {
    w.attn_norm = vec();
    w.wq = mat();
    w.wk = mat();
    w.wv = mat();
    w.wo = mat();
    w.mlp_norm = vec();
    w.w_gate = mat();
    w.w_up = mat();
    w.w_down = mat();
  }
  final_norm = vec();
  lm_head = mat();
}

template <class T>
void init_parameters(const ParamSet<T>& p, std::uint64_t seed, double init_std, double norm_noise) {
  auto host = Kokkos::create_mirror_view(p.flat());
  for (const auto& slot : p.slots()) {
    std::mt19937_64 rng(seed ^ (std::hash<std::string>{}(slot.name) * 0x9E3779B97F4A7C15ull));
    const bool is_norm = slot.shape.size() == 1;
    std::normal_distribution<double> normal(0.0, is_norm ? norm_noise : init_std);
    for (std::size_t i = 0; i < slot.size(); ++i) {
      const double noise = (is_norm && norm_noise == 0.0) ? 0.0 : normal(rng);
      host(slot.offset + i) = T(is_norm ? 1.0 + noise : noise);
    }
  }
  Kokkos::deep_copy(p.flat(), host);
}

template class ParamSet<float>;
template class ParamSet<double>;
template class ParamSet<bf16>;  // the weight copy of mixed precision (initialised from its fp32 master)
template void init_parameters(const ParamSet<float>&, std::uint64_t, double, double);
template void init_parameters(const ParamSet<double>&, std::uint64_t, double, double);

}  // namespace minilst
