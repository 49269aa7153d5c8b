#include "app/verify_export.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>
#include <stdexcept>

#include "io/atomic_write.hpp"
#include "io/h5.hpp"
#include "kernels/types.hpp"
#include "model/parameters.hpp"

namespace minilst::verify {

namespace {
// A 1-D dataset of variable-length strings.
void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& text) {
  h5::Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  H5Tset_size(type.id(), H5T_VARIABLE);
  const hsize_t n = text.size();
  h5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "dataspace of '" + name + "'");
  h5::Handle ds(H5Dcreate2(loc, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
                "create dataset '" + name + "'");
  std::vector<const char*> ptrs;
  for (const auto& t : text) ptrs.push_back(t.c_str());
  if (H5Dwrite(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
    throw std::runtime_error("write dataset '" + name + "'");
}

void summary_attrs(hid_t f, const VerifySummary& s) {
  h5::attr(f, "verdict", s.verdict);
  h5::attr(f, "layout", s.layout);
  h5::attr(f, "precision", s.precision);
  h5::attr(f, "ranks", std::int64_t(s.ranks));
  h5::attr(f, "first_failure", s.first_failure);
  h5::attr(f, "score_std", s.score_std);  // how peaked the inputs were (verify.cpp: score_shape)
  h5::attr(f, "moving_max_fraction", s.moving_max);
  h5::attr(f, "config", s.config_yaml);
}

// Element [micro][layer] tensor t of the capture, stacked over micro-steps: [M, S, cols].
std::vector<double> stacked(const StepCapture& c, int layer, int t) {
  std::vector<double> out;
  for (const auto& micro : c.micro) out.insert(out.end(), micro.at(layer)[t].begin(), micro.at(layer)[t].end());
  return out;
}
}  // namespace

void write_table(const std::string& path, const std::vector<CheckRow>& rows, const VerifySummary& s) {
  h5::AtomicFile file(path, unique_partial_suffix());
  {
    const hid_t f = file.id();
    h5::attr(f, "schema", std::string("minilst-verify"));
    summary_attrs(f, s);
    h5::attr(f, "certified", std::string(s.verdict == "PASSED" ? "yes" : "no"));
    std::vector<std::int64_t> layer, ok;
    std::vector<double> err, tol;
    std::vector<std::string> tensor;
    for (const auto& r : rows) {
      layer.push_back(r.layer);
      tensor.push_back(r.tensor);
      err.push_back(r.rel_err);
      tol.push_back(r.tol);
      ok.push_back(r.ok() ? 1 : 0);
    }
    const hsize_t n = rows.size();
    const auto table = h5::group(f, "/table");
    h5::write(f, "table/layer", layer, {n}, "1");
    write_strings(table.id(), "tensor", tensor);
    h5::write(f, "table/rel_err", err, {n}, "1");
    h5::write(f, "table/tol", tol, {n}, "1");
    h5::write(f, "table/ok", ok, {n}, "1");
  }
  file.commit();
}

void write_export(const std::string& path, const ModelConfig& cfg, std::int64_t seq_len, const ReferenceStep& ref,
                  const VerifySummary& s) {
  h5::AtomicFile file(path, unique_partial_suffix());
  {
    const hid_t f = file.id();
    h5::attr(f, "schema", std::string("minilst-verify-export"));
    summary_attrs(f, s);
    const std::int64_t H = cfg.heads, G = cfg.kv_heads, h = cfg.head_dim();
    const std::initializer_list<std::pair<const char*, std::int64_t>> sizes = {
        {"hidden", cfg.hidden}, {"layers", cfg.layers}, {"heads", H}, {"kv_heads", G}, {"head_dim", h},
        {"intermediate", cfg.intermediate}, {"vocab", cfg.vocab}, {"seq_len", seq_len},
        {"micro_steps", std::int64_t(ref.batches.size())}, {"window", ref.mask.window}, {"ignore_label", kIgnoreLabel}};
    for (const auto& [name, value] : sizes) h5::attr(f, name, value);
    h5::attr(f, "rope_theta", cfg.rope_theta);
    h5::attr(f, "norm_eps", cfg.norm_eps);
    h5::attr(f, "softmax_scale", 1.0 / std::sqrt(double(h)));

    const hsize_t M = ref.batches.size(), S = hsize_t(seq_len);
    std::vector<std::int64_t> tokens, labels, positions, rope, doc_ids, windows, starts{0};
    for (const auto& b : ref.batches) {
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      labels.insert(labels.end(), b.labels.begin(), b.labels.end());
    }
    for (const auto d : ref.mask.doc_starts)
      if (d > 0) starts.push_back(d);
    for (std::int64_t p = 0; p < seq_len; ++p) {
      positions.push_back(p);
      rope.push_back(ref.mask.rope_position(p));
      doc_ids.push_back(std::int64_t(std::upper_bound(starts.begin(), starts.end(), p) - starts.begin()) - 1);
    }
    h5::write(f, "inputs/tokens", tokens, {M, S}, "token id");
    h5::write(f, "inputs/labels", labels, {M, S}, "token id");
    h5::write(f, "inputs/positions", positions, {S}, "position");
    h5::write(f, "inputs/rope_positions", rope, {S}, "position");
    h5::write(f, "inputs/doc_starts", starts, {hsize_t(starts.size())}, "position");
    h5::write(f, "inputs/doc_ids", doc_ids, {S}, "1");
    for (int l = 0; l < cfg.layers; ++l) windows.push_back(ref.mask.windowed(l) ? ref.mask.window : 0);
    h5::write(f, "inputs/layer_windows", windows, {hsize_t(cfg.layers)}, "tokens");
    for (int l = 0; l < cfg.layers; ++l) {
      const std::string at = "layers/" + std::to_string(l) + "/";
      h5::write(f, at + "q_lo", ref.mask.at_layer(l).q_lo(positions), {S}, "position");
      for (int t = 0; t < kTensors; ++t) {
        const hsize_t heads = hsize_t(t == kK || t == kV || t == kDk || t == kDv ? G : H);
        std::vector<hsize_t> shape{M, S, heads};
        if (t != kLse) shape.push_back(hsize_t(h));
        h5::write(f, at + tensor_name(t), stacked(ref.tensors, l, t), shape, "1");
      }
    }
    h5::write(f, "loss", std::vector<double>{ref.loss}, {}, "1");
    for (const auto& slot : parameter_layout(cfg)) {
      std::vector<hsize_t> shape(slot.shape.begin(), slot.shape.end());
      const auto begin = std::ptrdiff_t(slot.offset), end = begin + std::ptrdiff_t(slot.size());
      h5::write(f, "params/" + slot.name, std::vector<double>(ref.params.begin() + begin, ref.params.begin() + end),
                shape, "1");
      h5::write(f, "grads/" + slot.name, std::vector<double>(ref.grads.begin() + begin, ref.grads.begin() + end), shape,
                "1");
    }
  }
  file.commit();
}

}  // namespace minilst::verify
