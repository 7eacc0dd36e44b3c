//===- SurrogateTest.cpp - Surrogate gradients against docs/Semantics.md
//------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Every surrogate attribute, parsed from text, is evaluated through the C++
// API and compared with the docs/Semantics.md formula transcribed here
// independently, and with a central finite difference of its primitive.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::flexsn;

namespace {

constexpr double kPi = 3.14159265358979323846;

double sigma(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double heaviside(double x) { return x >= 0 ? 1.0 : 0.0; }
/// The density of N(mean, sd^2) at x.
double normal(double x, double mean, double sd) {
  double z = (x - mean) / sd;
  return std::exp(-z * z / 2) / (sd * std::sqrt(2 * kPi));
}
double multiGaussian(double x, double sd, double h, double s) {
  return (1 + h) * normal(x, 0, sd) - h * normal(x, sd, s * sd) -
         h * normal(x, -sd, s * sd);
}

struct SurrogateCase {
  std::string text;                // attribute as a user writes it
  std::function<double(double)> g; // docs/Semantics.md, transcribed by hand
  std::vector<double> kinks;       // where g is discontinuous
};

void PrintTo(const SurrogateCase &c, std::ostream *os) { *os << c.text; }

// Formulas copied from the docs/Semantics.md table, parameters spelled out.
std::vector<SurrogateCase> surrogateCases() {
  return {
      {"#flexsn.sigmoid",
       [](double x) {
         double a = 4;
         return a * sigma(a * x) * (1 - sigma(a * x));
       },
       {}},
      {"#flexsn.sigmoid<alpha = 1.5>",
       [](double x) {
         double a = 1.5;
         return a * sigma(a * x) * (1 - sigma(a * x));
       },
       {}},
      {"#flexsn.atan",
       [](double x) {
         double a = 2;
         double u = kPi / 2 * a * x;
         return (a / 2) / (1 + u * u);
       },
       {}},
      {"#flexsn.atan<alpha = 0.5>",
       [](double x) {
         double a = 0.5;
         double u = kPi / 2 * a * x;
         return (a / 2) / (1 + u * u);
       },
       {}},
      {"#flexsn.piecewise_quadratic",
       [](double x) {
         double a = 1;
         return std::max(0.0, a - a * a * std::fabs(x));
       },
       {-1, 1}},
      {"#flexsn.piecewise_quadratic<alpha = 2.0>",
       [](double x) {
         double a = 2;
         return std::max(0.0, a - a * a * std::fabs(x));
       },
       {-0.5, 0.5}},
      {"#flexsn.piecewise_exp",
       [](double x) {
         double a = 1;
         return a / 2 * std::exp(-a * std::fabs(x));
       },
       {}},
      {"#flexsn.piecewise_exp<alpha = 3>",
       [](double x) {
         double a = 3;
         return a / 2 * std::exp(-a * std::fabs(x));
       },
       {}},
      {"#flexsn.soft_sign",
       [](double x) {
         double a = 2;
         double d = 1 / a + std::fabs(x);
         return 1 / (2 * a * d * d);
       },
       {}},
      {"#flexsn.super_spike",
       [](double x) {
         double a = 1;
         double d = std::fabs(x) + 1;
         return a / (d * d);
       },
       {}},
      {"#flexsn.super_spike<alpha = 0.25>",
       [](double x) {
         double a = 0.25;
         double d = std::fabs(x) + 1;
         return a / (d * d);
       },
       {}},
      {"#flexsn.erf",
       [](double x) {
         double a = 2;
         return a / std::sqrt(kPi) * std::exp(-(a * x) * (a * x));
       },
       {}},
      {"#flexsn.nonzero_sign_log_abs",
       [](double x) {
         double a = 1;
         return 1 / (1 / a + std::fabs(x));
       },
       {}},
      {"#flexsn.nonzero_sign_log_abs<alpha = 5.0>",
       [](double x) {
         double a = 5;
         return 1 / (1 / a + std::fabs(x));
       },
       {}},
      {"#flexsn.piecewise_leaky_relu",
       [](double x) {
         double w = 1, c = 0.01;
         return std::fabs(x) < w ? 1 / (2 * w) : c;
       },
       {-1, 1}},
      {"#flexsn.piecewise_leaky_relu<w = 0.5, c = -0.1>",
       [](double x) {
         double w = 0.5, c = -0.1;
         return std::fabs(x) < w ? 1 / (2 * w) : c;
       },
       {-0.5, 0.5}},
      {"#flexsn.squarewave_fourier_series",
       [](double x) {
         int n = 2;
         double T = 8, sum = 0;
         for (int i = 1; i <= n - 1; ++i)
           sum += std::cos((2 * i - 1) * (2 * kPi / T) * x);
         return 4 / T * sum;
       },
       {}},
      {"#flexsn.squarewave_fourier_series<n = 5, T_period = 3.0>",
       [](double x) {
         int n = 5;
         double T = 3, sum = 0;
         for (int i = 1; i <= n - 1; ++i)
           sum += std::cos((2 * i - 1) * (2 * kPi / T) * x);
         return 4 / T * sum;
       },
       {}},
      {"#flexsn.s2nn",
       [](double x) {
         double a = 4, b = 1;
         return x < 0 ? a * sigma(a * x) * (1 - sigma(a * x)) : b / (x + 1);
       },
       {0}},
      {"#flexsn.s2nn<alpha = 2.0, beta = 3.0>",
       [](double x) {
         double a = 2, b = 3;
         return x < 0 ? a * sigma(a * x) * (1 - sigma(a * x)) : b / (x + 1);
       },
       {0}},
      {"#flexsn.q_pseudo_spike",
       [](double x) {
         double a = 2;
         return std::pow(1 + 2 * std::fabs(x) / (a - 1), -a);
       },
       {}},
      {"#flexsn.q_pseudo_spike<alpha = 1.5>",
       [](double x) {
         double a = 1.5;
         return std::pow(1 + 2 * std::fabs(x) / (a - 1), -a);
       },
       {}},
      {"#flexsn.leaky_k_relu",
       [](double x) {
         double leak = 0, k = 1;
         return x >= 0 ? k : leak;
       },
       {0}},
      {"#flexsn.leaky_k_relu<leak = 0.1, k = 2.0>",
       [](double x) {
         double leak = 0.1, k = 2;
         return x >= 0 ? k : leak;
       },
       {0}},
      {"#flexsn.fake_numerical_gradient",
       [](double x) {
         double a = 0.3;
         return x == 0 ? a : std::min((2 * heaviside(x) - 1) / x, a);
       },
       {0}},
      {"#flexsn.log_tailed_relu",
       [](double x) {
         double a = 0;
         return x <= 0 ? a : (x <= 1 ? 1 : 1 / x);
       },
       {0}},
      {"#flexsn.log_tailed_relu<alpha = 0.2>",
       [](double x) {
         double a = 0.2;
         return x <= 0 ? a : (x <= 1 ? 1 : 1 / x);
       },
       {0, 1}},
      {"#flexsn.rect",
       [](double x) {
         double a = 1;
         return std::fabs(x) < 0.5 / a ? a : 0;
       },
       {-0.5, 0.5}},
      {"#flexsn.rect<alpha = 4.0>",
       [](double x) {
         double a = 4;
         return std::fabs(x) < 0.5 / a ? a : 0;
       },
       {-0.125, 0.125}},
      {"#flexsn.multi_gaussian",
       [](double x) { return multiGaussian(x, 0.5, 0.15, 6); },
       {}},
      {"#flexsn.multi_gaussian<sigma = 1.0, h = -0.5, s = 2.0>",
       [](double x) { return multiGaussian(x, 1, -0.5, 2); },
       {}},
      {"#flexsn.straight_through", [](double) { return 1.0; }, {}},
  };
}

const double kPoints[] = {-3.0,   -1.6,  -1.0, -0.7, -0.5,  -0.3,
                          -0.125, -0.01, 0.0,  0.01, 0.125, 0.3,
                          0.5,    0.7,   1.0,  1.6,  3.0};

class SurrogateTest : public ::testing::TestWithParam<SurrogateCase> {
protected:
  SurrogateTest() { context.loadDialect<FlexSNDialect>(); }

  SurrogateAttrInterface parse(const std::string &text) {
    Attribute attr = parseAttribute(text, &context);
    return dyn_cast_if_present<SurrogateAttrInterface>(attr);
  }

  MLIRContext context;
};

TEST_P(SurrogateTest, DerivativeMatchesSpecFormula) {
  const SurrogateCase &c = GetParam();
  SurrogateAttrInterface surrogate = parse(c.text);
  ASSERT_TRUE(surrogate) << c.text;
  for (double x : kPoints) {
    double want = c.g(x);
    EXPECT_NEAR(surrogate.evalDerivative(x), want,
                1e-12 * (1 + std::fabs(want)))
        << c.text << " at x = " << x;
  }
}

TEST_P(SurrogateTest, DerivativeMatchesFiniteDifferenceOfPrimitive) {
  const SurrogateCase &c = GetParam();
  SurrogateAttrInterface surrogate = parse(c.text);
  ASSERT_TRUE(surrogate) << c.text;
  const double h = 1e-6;
  int checked = 0;
  for (double x : kPoints) {
    // A central difference straddling a jump of g measures nothing useful.
    if (llvm::any_of(c.kinks,
                     [&](double k) { return std::fabs(x - k) < 10 * h; }))
      continue;
    double fd =
        (surrogate.evalPrimitive(x + h) - surrogate.evalPrimitive(x - h)) /
        (2 * h);
    EXPECT_NEAR(fd, surrogate.evalDerivative(x), 1e-5 * (1 + std::fabs(fd)))
        << c.text << " at x = " << x;
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// The primitive is monotone wherever g >= 0: a wrong sign in a branch of
// the primitive shows up here even where g itself is right.
TEST_P(SurrogateTest, PrimitiveIsMonotoneWhereDerivativeIsNonNegative) {
  const SurrogateCase &c = GetParam();
  SurrogateAttrInterface surrogate = parse(c.text);
  ASSERT_TRUE(surrogate);
  for (double x = -3.0; x < 3.0; x += 0.01) {
    if (c.g(x) < 0 || c.g(x + 0.01) < 0)
      continue;
    EXPECT_LE(surrogate.evalPrimitive(x),
              surrogate.evalPrimitive(x + 0.01) + 1e-12)
        << c.text << " at x = " << x;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllSurrogates, SurrogateTest, ::testing::ValuesIn(surrogateCases()),
    [](const ::testing::TestParamInfo<SurrogateCase> &info) {
      // "#flexsn.rect<alpha = 4.0>" -> "rect_alpha_4_0"
      std::string name;
      for (char ch : info.param.text.substr(8))
        if (llvm::isAlnum(ch))
          name += ch;
        else if (!name.empty() && name.back() != '_')
          name += '_';
      while (!name.empty() && name.back() == '_')
        name.pop_back();
      return name;
    });

//===----------------------------------------------------------------------===//
// Construction through the C++ API
//===----------------------------------------------------------------------===//

class SurrogateApiTest : public ::testing::Test {
protected:
  SurrogateApiTest() { context.loadDialect<FlexSNDialect>(); }
  MLIRContext context;
};

TEST_F(SurrogateApiTest, DefaultsMatchSpec) {
  // docs/Semantics.md: sigmoid(alpha=4), s2nn(alpha=4, beta=1), squarewave(n=2,
  // T=8).
  auto sigmoid = cast<SigmoidAttr>(parseAttribute("#flexsn.sigmoid", &context));
  EXPECT_EQ(sigmoid.getAlpha().convertToDouble(), 4.0);
  auto s2nn = cast<S2NNAttr>(parseAttribute("#flexsn.s2nn", &context));
  EXPECT_EQ(s2nn.getAlpha().convertToDouble(), 4.0);
  EXPECT_EQ(s2nn.getBeta().convertToDouble(), 1.0);
  auto wave = cast<SquarewaveFourierSeriesAttr>(
      parseAttribute("#flexsn.squarewave_fourier_series", &context));
  EXPECT_EQ(wave.getN(), 2);
  EXPECT_EQ(wave.getTPeriod().convertToDouble(), 8.0);
  auto plr = cast<PiecewiseLeakyReLUAttr>(
      parseAttribute("#flexsn.piecewise_leaky_relu", &context));
  EXPECT_EQ(plr.getW().convertToDouble(), 1.0);
  EXPECT_EQ(plr.getC().convertToDouble(), 0.01);
}

TEST_F(SurrogateApiTest, GetCheckedRejectsOutOfRangeParameters) {
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(&context)); };
  EXPECT_FALSE(
      SigmoidAttr::getChecked(emitError, &context, llvm::APFloat(0.0)));
  EXPECT_NE(message.find("alpha > 0"), std::string::npos) << message;
  EXPECT_FALSE(
      QPseudoSpikeAttr::getChecked(emitError, &context, llvm::APFloat(1.0)));
  EXPECT_NE(message.find("alpha > 1"), std::string::npos) << message;
  EXPECT_FALSE(SquarewaveFourierSeriesAttr::getChecked(
      emitError, &context, int64_t(0), llvm::APFloat(8.0)));
  EXPECT_FALSE(PiecewiseLeakyReLUAttr::getChecked(
      emitError, &context, llvm::APFloat(1.0), llvm::APFloat(std::nan(""))));
  EXPECT_TRUE(
      QPseudoSpikeAttr::getChecked(emitError, &context, llvm::APFloat(1.01)));
}

TEST_F(SurrogateApiTest, FormatShortestRoundTrips) {
  for (double v : {4.0, 0.01, -0.1, 1e20, 1.0 / 3.0, 5e-324}) {
    std::string text = formatShortest(v);
    EXPECT_NE(text.find('.'), std::string::npos) << text;
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
  EXPECT_EQ(formatShortest(4.0), "4.0");
  EXPECT_EQ(formatShortest(0.1f), "0.1");
}

} // namespace
