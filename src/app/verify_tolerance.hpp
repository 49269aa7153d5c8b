// The tolerances `minilst verify` certifies a layout at: relative L2 error ||a - b|| / ||b||
// of each tensor against the single-rank float64 reference (loss: relative difference).
//   float64  1e-10 every tensor and the loss (every layout equals one rank to rounding)
//   bf16     the stated tolerance (docs/techniques.md): loss 5e-3 (kBf16LossTolerance, also
//            the reference check's floor), every tensor 5e-2
//   float32  1e-4 every tensor and the loss (kReportableRtol: the loosest reference
//            tolerance a reportable float run may use)
#pragma once

#include "core/config.hpp"
#include "io/deck.hpp"
#include "results/run_rules.hpp"

namespace minilst::verify {

constexpr double kFloat64Tolerance = 1e-10;
constexpr double kBf16TensorTolerance = 5e-2;
constexpr double kFloat32Tolerance = kReportableRtol;

struct Tolerance {
  double tensor, loss;
};

inline Tolerance tolerance_of(Precision p) {
  switch (p) {
    case Precision::float64: return {kFloat64Tolerance, kFloat64Tolerance};
    case Precision::bf16: return {kBf16TensorTolerance, kBf16LossTolerance};
    case Precision::float32: break;
  }
  return {kFloat32Tolerance, kFloat32Tolerance};
}

}  // namespace minilst::verify
