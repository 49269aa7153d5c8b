#include "io/tensor_dump.hpp"

#include <cstdio>
#include <stdexcept>

#include "io/atomic_write.hpp"
#include "io/h5.hpp"
#include "io/output_names.hpp"

namespace minilst {

namespace {

// The dump at `path`, atomically (io/atomic_write.hpp: throws OutputTaken where the name is not this run's).
void write_dump_file(const std::string& path, const ModelConfig& cfg, std::int64_t seq_len,
                     const std::string& config_yaml, const SequenceMask& mask,
                     const std::vector<Batch>& micro_batches, double loss,
                     const std::vector<double>& params, const std::vector<double>& grads) {
  h5::AtomicFile file(path, unique_partial_suffix());
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
    std::vector<std::int64_t> starts{0}, windows;
    for (const auto d : mask.doc_starts)
      if (d > 0) starts.push_back(d);
    for (int l = 0; l < cfg.layers; ++l) windows.push_back(mask.windowed(l) ? mask.window : 0);
    h5::attr(f, "window", mask.window);
    h5::write(f, "doc_starts", starts, {hsize_t(starts.size())}, "position");
    h5::write(f, "layer_windows", windows, {hsize_t(windows.size())}, "tokens");
    for (const auto& slot : parameter_layout(cfg)) {
      std::vector<hsize_t> shape(slot.shape.begin(), slot.shape.end());
      const auto begin = std::ptrdiff_t(slot.offset), end = begin + std::ptrdiff_t(slot.size());
      h5::write(f, "params/" + slot.name, std::vector<double>(params.begin() + begin, params.begin() + end), shape, "1");
      h5::write(f, "grads/" + slot.name, std::vector<double>(grads.begin() + begin, grads.begin() + end), shape, "1");
    }
  }
  file.commit();
}

}  // namespace

// The name asked for, or, where it holds a file that is not this run's to replace (put there
// during the run), a sibling (output_names.hpp), said on stderr.
std::string write_tensor_dump(const std::string& path, const ModelConfig& cfg, std::int64_t seq_len,
                       const std::string& config_yaml, const SequenceMask& mask,
                       const std::vector<Batch>& micro_batches, double loss,
                       const std::vector<double>& params, const std::vector<double>& grads) {
  constexpr int kSiblings = 4;  // each sibling name taken in turn: someone is creating them on purpose
  for (int sibling = 0; sibling <= kSiblings; ++sibling) {
    const std::string target = sibling == 0 ? path : sibling_path(path, process_tag(), sibling);
    std::string taken = "'" + target + "' is not this run's to replace: a file was put there by someone else during the run";
    if (may_write(target)) {
      try {
        write_dump_file(target, cfg, seq_len, config_yaml, mask, micro_batches, loss, params, grads);
        if (sibling > 0) std::fprintf(stderr, "output.dump: the dump is written to '%s'\n", target.c_str());
        return target;
      } catch (const OutputTaken& e) {  // taken between the check and the rename
        taken = e.what();
      }
    }
    std::fprintf(stderr, "warning: output.dump: %s; it is left untouched\n", taken.c_str());
  }
  throw std::runtime_error("the tensor dump was not written: '" + path + "' and its siblings are all taken");
}

}  // namespace minilst
