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
// other types provide theirs by argument-dependent lookup.
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

template <typename V>
V sigmoidGrad(V x, double a) {
  V s = sigmoid(x * a);
  return s * (1.0 - s) * a;
}
template <typename V>
V sigmoidPrimitive(V x, double a) {
  return sigmoid(x * a);
}

template <typename V>
V atanGrad(V x, double a) {
  V u = x * (kPi / 2 * a);
  return 1.0 / (u * u + 1.0) * (a / 2);
}
template <typename V>
V atanPrimitive(V x, double a) {
  return atan(x * (kPi / 2 * a)) * (1.0 / kPi) + 0.5;
}

template <typename V>
V piecewiseQuadraticGrad(V x, double a) {
  return max(abs(x) * (-a * a) + a, 0.0);
}
template <typename V>
V piecewiseQuadraticPrimitive(V x, double a) {
  V inner = x * abs(x) * (-a * a / 2) + x * a + 0.5;
  return select(x < -1.0 / a, splat(x, 0.0),
                select(x > 1.0 / a, splat(x, 1.0), inner));
}

template <typename V>
V piecewiseExpGrad(V x, double a) {
  return exp(abs(x) * -a) * (a / 2);
}
template <typename V>
V piecewiseExpPrimitive(V x, double a) {
  V half = exp(abs(x) * -a) * 0.5;
  return select(x < 0.0, half, 1.0 - half);
}

template <typename V>
V softSignGrad(V x, double a) {
  V d = abs(x) + 1.0 / a;
  return 1.0 / (d * d * (2 * a));
}
template <typename V>
V softSignPrimitive(V x, double a) {
  return (x * a / (abs(x) * a + 1.0) + 1.0) * 0.5;
}

template <typename V>
V superSpikeGrad(V x, double a) {
  V d = abs(x) + 1.0;
  return a / (d * d);
}
template <typename V>
V superSpikePrimitive(V x, double a) {
  return x * a / (abs(x) + 1.0);
}

template <typename V>
V erfGrad(V x, double a) {
  V u = x * a;
  return exp(u * u * -1.0) * (a / std::sqrt(kPi));
}
template <typename V>
V erfPrimitive(V x, double a) {
  return (erf(x * a) + 1.0) * 0.5;
}

template <typename V>
V nonzeroSignLogAbsGrad(V x, double a) {
  return 1.0 / (abs(x) + 1.0 / a);
}
template <typename V>
V nonzeroSignLogAbsPrimitive(V x, double a) {
  V m = log1p(abs(x) * a);
  return select(x < 0.0, m * -1.0, m);
}

template <typename V>
V piecewiseLeakyReLUGrad(V x, double w, double c) {
  return select(abs(x) < w, splat(x, 1.0 / (2 * w)), splat(x, c));
}
template <typename V>
V piecewiseLeakyReLUPrimitive(V x, double w, double c) {
  return select(x < -w, (x + w) * c,
                select(x > w, (x - w) * c + 1.0, x * (1.0 / (2 * w)) + 0.5));
}

template <typename V>
V squarewaveFourierSeriesGrad(V x, int64_t n, double period) {
  double omega = 2 * kPi / period;
  V sum = splat(x, 0.0);
  for (int64_t i = 1; i < n; ++i)
    sum = sum + cos(x * ((2 * i - 1) * omega));
  return sum * (4 / period);
}
template <typename V>
V squarewaveFourierSeriesPrimitive(V x, int64_t n, double period) {
  double omega = 2 * kPi / period;
  V sum = splat(x, 0.0);
  for (int64_t i = 1; i < n; ++i)
    sum = sum + sin(x * ((2 * i - 1) * omega)) * (1.0 / (2 * i - 1));
  return sum * (2 / kPi) + 0.5;
}

// The x >= 0 branch is evaluated at max(x, 0) so that the branch not taken
// never divides by zero (SpikingJelly's fp16 s2nn returns NaN there).
template <typename V>
V s2nnGrad(V x, double a, double beta) {
  return select(x < 0.0, sigmoidGrad(x, a), beta / (max(x, 0.0) + 1.0));
}
template <typename V>
V s2nnPrimitive(V x, double a, double beta) {
  return select(x < 0.0, sigmoid(x * a), log1p(max(x, 0.0)) * beta + 0.5);
}

template <typename V>
V qPseudoSpikeGrad(V x, double a) {
  return pow(abs(x) * (2 / (a - 1)) + 1.0, -a);
}
template <typename V>
V qPseudoSpikePrimitive(V x, double a) {
  V p = pow(abs(x) * (2 / (a - 1)) + 1.0, 1 - a) * 0.5;
  return select(x < 0.0, p, 1.0 - p);
}

template <typename V>
V leakyKReLUGrad(V x, double leak, double k) {
  return select(x >= 0.0, splat(x, k), splat(x, leak));
}
template <typename V>
V leakyKReLUPrimitive(V x, double leak, double k) {
  return select(x >= 0.0, x * k, x * leak);
}

// 1/|x| is +inf at 0, where the minimum then gives alpha, as specified.
template <typename V>
V fakeNumericalGradientGrad(V x, double a) {
  return min(1.0 / abs(x), a);
}
template <typename V>
V fakeNumericalGradientPrimitive(V x, double a) {
  V m = abs(x);
  V p = select(m <= 1.0 / a, m * a, log(max(m * a, 1.0)) + 1.0);
  return select(x < 0.0, p * -1.0, p);
}

template <typename V>
V logTailedReLUGrad(V x, double a) {
  return select(x <= 0.0, splat(x, a),
                select(x <= 1.0, splat(x, 1.0), 1.0 / max(x, 1.0)));
}
template <typename V>
V logTailedReLUPrimitive(V x, double a) {
  return select(x <= 0.0, x * a, select(x <= 1.0, x, log(max(x, 1.0)) + 1.0));
}

template <typename V>
V rectGrad(V x, double a) {
  return select(abs(x) < 0.5 / a, splat(x, a), splat(x, 0.0));
}
template <typename V>
V rectPrimitive(V x, double a) {
  return min(max(x * a, -0.5), 0.5) + 0.5;
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
