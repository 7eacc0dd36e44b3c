//===- SurrogateFormulas.h - Surrogate gradients, written once --*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Every surrogate's g(x) and primitive, written once as templates over a
// scalar type `V`. Instantiated with `double` they evaluate (attribute
// methods, folding, tests); instantiated with an IR-value wrapper that
// overloads the same operators and functions they emit `arith`/`math` ops,
// so the compiled kernel and the reference evaluation cannot disagree.
//
// A type `V` must support `+ - * /` with itself and with `double`, the
// comparisons `< <= > >=` against `double` (yielding a type accepted by
// `select`), and the functions declared for `double` below. For `double`
// they are declared before the templates so that ordinary lookup finds them;
// other types provide theirs by argument-dependent lookup. Parameters have
// their own type `P` (`N` for an integer), `double` (`int64_t`) when
// evaluating or emitting IR; a symbolic `P` lets a tool print a formula with
// its parameters as names (flexsn-pygen writes the Python layer's from
// these templates), so a formula must use only arithmetic on parameters and
// `seriesSum` for a sum over an integer parameter.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_SURROGATEFORMULAS_H
#define FLEXSN_DIALECT_FLEXSN_IR_SURROGATEFORMULAS_H

#include <cmath>
#include <cstdint>

namespace mlir::flexsn::surrogate {

inline double select(bool cond, double a, double b) { return cond ? a : b; }
/// A constant of the same kind as `like` (for IR: materialized beside it).
inline double splat(double /*like*/, double value) { return value; }
inline double abs(double x) { return std::fabs(x); }
inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double log1p(double x) { return std::log1p(x); }
inline double erf(double x) { return std::erf(x); }
inline double atan(double x) { return std::atan(x); }
inline double sin(double x) { return std::sin(x); }
inline double cos(double x) { return std::cos(x); }
inline double pow(double x, double y) { return std::pow(x, y); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr double kPi = 3.14159265358979323846;

/// term(1) + ... + term(n - 1), unrolled: the IR backend emits every term.
template <typename V, typename F>
V seriesSum(V zero, int64_t n, F term) {
  V sum = zero;
  for (int64_t i = 1; i < n; ++i)
    sum = sum + term(i);
  return sum;
}

template <typename V, typename P>
V sigmoidGrad(V x, P a) {
  V s = sigmoid(x * a);
  return s * (1.0 - s) * a;
}
template <typename V, typename P>
V sigmoidPrimitive(V x, P a) {
  return sigmoid(x * a);
}

template <typename V, typename P>
V atanGrad(V x, P a) {
  V u = x * (kPi / 2 * a);
  return 1.0 / (u * u + 1.0) * (a / 2);
}
template <typename V, typename P>
V atanPrimitive(V x, P a) {
  return atan(x * (kPi / 2 * a)) * (1.0 / kPi) + 0.5;
}

template <typename V, typename P>
V piecewiseQuadraticGrad(V x, P a) {
  return max(abs(x) * (-a * a) + a, 0.0);
}
template <typename V, typename P>
V piecewiseQuadraticPrimitive(V x, P a) {
  V inner = x * abs(x) * (-a * a / 2) + x * a + 0.5;
  return select(x < -1.0 / a, splat(x, 0.0),
                select(x > 1.0 / a, splat(x, 1.0), inner));
}

template <typename V, typename P>
V piecewiseExpGrad(V x, P a) {
  return exp(abs(x) * -a) * (a / 2);
}
template <typename V, typename P>
V piecewiseExpPrimitive(V x, P a) {
  V half = exp(abs(x) * -a) * 0.5;
  return select(x < 0.0, half, 1.0 - half);
}

template <typename V, typename P>
V softSignGrad(V x, P a) {
  V d = abs(x) + 1.0 / a;
  return 1.0 / (d * d * (2 * a));
}
template <typename V, typename P>
V softSignPrimitive(V x, P a) {
  return (x * a / (abs(x) * a + 1.0) + 1.0) * 0.5;
}

template <typename V, typename P>
V superSpikeGrad(V x, P a) {
  V d = abs(x) + 1.0;
  return a / (d * d);
}
template <typename V, typename P>
V superSpikePrimitive(V x, P a) {
  return x * a / (abs(x) + 1.0);
}

template <typename V, typename P>
V erfGrad(V x, P a) {
  V u = x * a;
  return exp(u * u * -1.0) * (a / std::sqrt(kPi));
}
template <typename V, typename P>
V erfPrimitive(V x, P a) {
  return (erf(x * a) + 1.0) * 0.5;
}

template <typename V, typename P>
V nonzeroSignLogAbsGrad(V x, P a) {
  return 1.0 / (abs(x) + 1.0 / a);
}
template <typename V, typename P>
V nonzeroSignLogAbsPrimitive(V x, P a) {
  V m = log1p(abs(x) * a);
  return select(x < 0.0, m * -1.0, m);
}

template <typename V, typename P>
V piecewiseLeakyReLUGrad(V x, P w, P c) {
  return select(abs(x) < w, splat(x, 1.0 / (2 * w)), splat(x, c));
}
template <typename V, typename P>
V piecewiseLeakyReLUPrimitive(V x, P w, P c) {
  return select(x < -w, (x + w) * c,
                select(x > w, (x - w) * c + 1.0, x * (1.0 / (2 * w)) + 0.5));
}

template <typename V, typename N, typename P>
V squarewaveFourierSeriesGrad(V x, N n, P period) {
  auto omega = 2 * kPi / period;
  V sum = seriesSum(splat(x, 0.0), n,
                    [&](auto i) { return cos(x * ((2 * i - 1) * omega)); });
  return sum * (4 / period);
}
template <typename V, typename N, typename P>
V squarewaveFourierSeriesPrimitive(V x, N n, P period) {
  auto omega = 2 * kPi / period;
  V sum = seriesSum(splat(x, 0.0), n, [&](auto i) {
    return sin(x * ((2 * i - 1) * omega)) * (1.0 / (2 * i - 1));
  });
  return sum * (2 / kPi) + 0.5;
}

// The x >= 0 branch is evaluated at max(x, 0) so that the branch not taken
// never divides by zero (SpikingJelly's fp16 s2nn returns NaN there).
template <typename V, typename P>
V s2nnGrad(V x, P a, P beta) {
  return select(x < 0.0, sigmoidGrad(x, a), beta / (max(x, 0.0) + 1.0));
}
template <typename V, typename P>
V s2nnPrimitive(V x, P a, P beta) {
  return select(x < 0.0, sigmoid(x * a), log1p(max(x, 0.0)) * beta + 0.5);
}

template <typename V, typename P>
V qPseudoSpikeGrad(V x, P a) {
  return pow(abs(x) * (2 / (a - 1)) + 1.0, -a);
}
template <typename V, typename P>
V qPseudoSpikePrimitive(V x, P a) {
  V p = pow(abs(x) * (2 / (a - 1)) + 1.0, 1 - a) * 0.5;
  return select(x < 0.0, p, 1.0 - p);
}

template <typename V, typename P>
V leakyKReLUGrad(V x, P leak, P k) {
  return select(x >= 0.0, splat(x, k), splat(x, leak));
}
template <typename V, typename P>
V leakyKReLUPrimitive(V x, P leak, P k) {
  return select(x >= 0.0, x * k, x * leak);
}

// 1/|x| is +inf at 0, where the minimum then gives alpha, as specified.
template <typename V, typename P>
V fakeNumericalGradientGrad(V x, P a) {
  return min(1.0 / abs(x), a);
}
template <typename V, typename P>
V fakeNumericalGradientPrimitive(V x, P a) {
  V m = abs(x);
  V p = select(m <= 1.0 / a, m * a, log(max(m * a, 1.0)) + 1.0);
  return select(x < 0.0, p * -1.0, p);
}

template <typename V, typename P>
V logTailedReLUGrad(V x, P a) {
  return select(x <= 0.0, splat(x, a),
                select(x <= 1.0, splat(x, 1.0), 1.0 / max(x, 1.0)));
}
template <typename V, typename P>
V logTailedReLUPrimitive(V x, P a) {
  return select(x <= 0.0, x * a, select(x <= 1.0, x, log(max(x, 1.0)) + 1.0));
}

template <typename V, typename P>
V rectGrad(V x, P a) {
  return select(abs(x) < 0.5 / a, splat(x, a), splat(x, 0.0));
}
template <typename V, typename P>
V rectPrimitive(V x, P a) {
  return min(max(x * a, -0.5), 0.5) + 0.5;
}

// Yin, Corradi and Bohté (2021): a Gaussian of width sigma minus two wider
// ones (width s·sigma) centred at ±sigma, weighted h: the negative lobes
// push potentials away from the threshold.
template <typename V, typename S>
V normalDensity(V d, S stddev) {
  return exp(d * d * (-0.5 / (stddev * stddev))) *
         (1 / (std::sqrt(2 * kPi) * stddev));
}
template <typename V, typename S>
V normalDistribution(V d, S stddev) {
  return (erf(d * (1 / (std::sqrt(2.0) * stddev))) + 1.0) * 0.5;
}
template <typename V, typename P>
V multiGaussianGrad(V x, P sigma, P h, P s) {
  return normalDensity(x, sigma) * (1.0 + h) -
         (normalDensity(x - sigma, s * sigma) +
          normalDensity(x + sigma, s * sigma)) *
             h;
}
template <typename V, typename P>
V multiGaussianPrimitive(V x, P sigma, P h, P s) {
  return normalDistribution(x, sigma) * (1.0 + h) -
         (normalDistribution(x - sigma, s * sigma) +
          normalDistribution(x + sigma, s * sigma)) *
             h;
}

template <typename V>
V straightThroughGrad(V x) {
  return splat(x, 1.0);
}
template <typename V>
V straightThroughPrimitive(V x) {
  return x;
}

} // namespace mlir::flexsn::surrogate

#endif // FLEXSN_DIALECT_FLEXSN_IR_SURROGATEFORMULAS_H
