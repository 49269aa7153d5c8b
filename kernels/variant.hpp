// Which implementation of the kernels a run uses (run.kernels), chosen at run time:
//   optimized  the tiled, vectorised kernels (kernels/<name>.hpp)
//   reference  the plain loops beside them (kernels/<name>_reference.hpp): the
//              obvious code for each formula, slow, for checking the optimised ones
// Tests hold the two equal; the metrics file records which ran (kernel_variant).
#pragma once

namespace minilst {

enum class KernelVariant { optimized, reference };

}  // namespace minilst
