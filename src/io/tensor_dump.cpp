#include "io/tensor_dump.hpp"

#include <cstdio>
#include <stdexcept>

#include "io/h5.hpp"

namespace minilst {

void write_tensor_dump(const std::string& path, const ModelConfig& cfg, std::int64_t seq_len,
                       const std::string& config_yaml, const std::vector<Batch>& micro_batches, double loss,
                       const std::vector<double>& params, const std::vector<double>& grads) {
  h5::AtomicFile file(path);
  {
    const hid_t f = file.id();
    h5::attr(f, "schema", std::string("minilst-tensor-dump"));
    h5::attr(f, "config", config_yaml);
    h5::attr(f, "hidden", std::int64_t(cfg.hidden));
    h5::attr(f, "layers", std::int64_t(cfg.layers));
    h5::attr(f, "heads", std::int64_t(cfg.heads));
    h5::attr(f, "kv_heads", std::int64_t(cfg.kv_heads));
    h5::attr(f, "intermediate", std::int64_t(cfg.intermediate));
    h5::attr(f, "vocab", std::int64_t(cfg.vocab));
    h5::attr(f, "rope_theta", cfg.rope_theta);
    h5::attr(f, "norm_eps", cfg.norm_eps);
    h5::attr(f, "seq_len", seq_len);
    h5::attr(f, "grad_accum", std::int64_t(micro_batches.size()));

    const hsize_t S = hsize_t(seq_len), A = hsize_t(micro_batches.size());
    std::vector<std::int64_t> tokens, labels;
    for (const auto& b : micro_batches) {
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      labels.insert(labels.end(), b.labels.begin(), b.labels.end());
    }
    h5::write(f, "tokens", micro_batches.at(0).tokens, {S}, "token id");
    h5::write(f, "labels", micro_batches.at(0).labels, {S}, "token id");
    h5::write(f, "micro_tokens", tokens, {A, S}, "token id");
    h5::write(f, "micro_labels", labels, {A, S}, "token id");
    h5::write(f, "loss", std::vector<double>{loss}, {}, "1");
    for (const auto& slot : parameter_layout(cfg)) {
      std::vector<hsize_t> shape(slot.shape.begin(), slot.shape.end());
      const auto begin = std::ptrdiff_t(slot.offset), end = begin + std::ptrdiff_t(slot.size());
      h5::write(f, "params/" + slot.name, std::vector<double>(params.begin() + begin, params.begin() + end), shape, "1");
      h5::write(f, "grads/" + slot.name, std::vector<double>(grads.begin() + begin, grads.begin() + end), shape, "1");
    }
  }
  file.commit();
}

}  // namespace minilst
