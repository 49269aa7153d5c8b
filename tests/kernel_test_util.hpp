// Helpers shared by the kernel tests (tests/kernels/test_*.cpp, one program: test_kernels):
// Views <-> flat row-major host vectors, random fills, error measures with their printed
// "[err] <what> = <value>" lines, the central finite-difference driver, position lists.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/types.hpp"

namespace minilst::kernel_test {

using minilst::Mat;
using minilst::Vec;
using Host = std::vector<double>;
using Rng = std::mt19937_64;

constexpr double kFdTol = 1e-6;  // norm-wise relative error of a gradient against FD
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

template <class View>
Host to_host(const View& x) {
  auto hx = Kokkos::create_mirror_view(x);
  Kokkos::deep_copy(hx, x);
  Host out;
  if constexpr (int(View::rank) == 1) {
    for (std::size_t i = 0; i < hx.extent(0); ++i) out.push_back(double(hx(i)));
  } else {
    for (std::size_t i = 0; i < hx.extent(0); ++i)
      for (std::size_t j = 0; j < hx.extent(1); ++j) out.push_back(double(hx(i, j)));
  }
  return out;
}

template <class View>
void from_host(const View& x, const Host& v) {
  auto hx = Kokkos::create_mirror_view(x);
  std::size_t n = 0;
  using V = typename View::non_const_value_type;
  if constexpr (int(View::rank) == 1) {
    for (std::size_t i = 0; i < hx.extent(0); ++i) hx(i) = V(v.at(n++));
  } else {
    for (std::size_t i = 0; i < hx.extent(0); ++i)
      for (std::size_t j = 0; j < hx.extent(1); ++j) hx(i, j) = V(v.at(n++));
  }
  ASSERT_EQ(n, v.size());
  Kokkos::deep_copy(x, hx);
}

inline Host random_vec(std::size_t n, Rng& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Host v(n);
  for (auto& e : v) e = dist(rng);
  return v;
}

template <class View>
void fill_random(const View& x, Rng& rng, double lo = -1.0, double hi = 1.0) {
  from_host(x, random_vec(x.size(), rng, lo, hi));
}

// A View of the given shape holding the values of a host vector.
template <class T>
Mat<T> mat_of(const char* label, std::size_t r, std::size_t c, const Host& v) {
  Mat<T> m(std::string(label), r, c);
  from_host(m, v);
  return m;
}
template <class T>
Vec<T> vec_of(const char* label, const Host& v) {
  Vec<T> x(std::string(label), v.size());
  from_host(x, v);
  return x;
}

// A device copy (for kernels that use an input as scratch, or work in place).
template <class T>
Mat<T> copy_of(const Mat<T>& x) {
  Mat<T> y(std::string(x.label()) + "_copy", x.extent(0), x.extent(1));
  Kokkos::deep_copy(y, x);
  return y;
}

inline Host scaled(Host a, double s) {
  for (auto& e : a) e *= s;
  return a;
}

inline Vec<std::int64_t> ids(const std::vector<std::int64_t>& v) {
  Vec<std::int64_t> x("ids", v.size());
  auto hx = Kokkos::create_mirror_view(x);
  for (std::size_t i = 0; i < v.size(); ++i) hx(i) = v[i];
  Kokkos::deep_copy(x, hx);
  return x;
}

inline double dot(const Host& a, const Host& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline double norm(const Host& a) { return std::sqrt(dot(a, a)); }

// ||a - b|| / ||b|| (absolute when b is zero); +inf when anything is not finite.
inline double rel_err(const Host& a, const Host& b) {
  EXPECT_EQ(a.size(), b.size());
  Host d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
    d[i] = a[i] - b[i];
  }
  const double nb = norm(b);
  return nb > 0 ? norm(d) / nb : norm(d);
}

// max |a - b|; equal infinities count as 0, anything else non-finite as +inf.
inline double max_abs_diff(const Host& a, const Host& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const double d = std::fabs(a[i] - b[i]);
    m = std::isfinite(d) ? std::max(m, d) : std::numeric_limits<double>::infinity();
  }
  return m;
}

inline void note(const std::string& what, double err) { std::printf("  [err] %s = %.3e\n", what.c_str(), err); }

// Prints err and expects it at most limit.
inline void expect_le(const std::string& what, double err, double limit) {
  note(what, err);
  EXPECT_LE(err, limit) << what;
}

// The storage type's name in messages, and a tolerance that depends on it.
template <class T>
std::string type_name() {
  return std::is_same<T, double>::value ? "double" : "float";
}
template <class T>
constexpr double tol(double for_double, double for_float) {
  return std::is_same<T, double>::value ? for_double : for_float;
}

// Central FD gradient of loss() with respect to every entry of x (a rank-1 or rank-2 View that
// loss() reads). Each entry is moved by +-h max(1, |x|), written back to x, and restored.
template <class View>
Host fd_grad(const View& x, const std::function<double()>& loss, double h = 1e-5) {
  auto hx = Kokkos::create_mirror_view(x);
  Kokkos::deep_copy(hx, x);
  auto entry = [&](std::size_t n) -> auto& {
    if constexpr (int(View::rank) == 1) {
      return hx(n);
    } else {
      return hx(n / hx.extent(1), n % hx.extent(1));
    }
  };
  Host g(x.size());
  for (std::size_t n = 0; n < x.size(); ++n) {
    const auto orig = entry(n);
    const double step = h * std::max(1.0, std::fabs(double(orig)));
    const auto xp = orig + step, xm = orig - step;
    entry(n) = xp;
    Kokkos::deep_copy(x, hx);
    const double lp = loss();
    entry(n) = xm;
    Kokkos::deep_copy(x, hx);
    const double lm = loss();
    entry(n) = orig;
    Kokkos::deep_copy(x, hx);
    g[n] = (lp - lm) / double(xp - xm);
  }
  return g;
}

// Asserts ||analytic - fd|| / ||fd|| <= kFdTol, prints it, and returns it.
inline double expect_grad_close(const std::string& what, const Host& analytic, const Host& fd) {
  EXPECT_GT(norm(fd), 0.0) << what << ": FD gradient is zero, the check would be vacuous";
  const double e = rel_err(analytic, fd);
  note(what + " vs FD", e);
  EXPECT_LE(e, kFdTol) << what;
  return e;
}

inline std::vector<std::int64_t> iota_pos(int n, std::int64_t start = 0) {
  std::vector<std::int64_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = start + i;
  return p;
}

inline std::vector<std::int64_t> shuffled(std::vector<std::int64_t> p, Rng& rng) {
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

inline std::vector<std::int64_t> concat(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace minilst::kernel_test
