//===- CpuKernelTest.cpp - Generated CPU kernels against references -------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Compiles the shipped neurons' inference and final-state kernels in process
// (ExecutionEngine) and checks them against docs/Semantics.md transcribed here
// in plain C++, for hard/soft reset, detach on/off, several T and N, f32 and
// f16.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Runner/CpuKernel.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <random>

using namespace mlir;
using namespace mlir::flexsn;

namespace {

//===----------------------------------------------------------------------===//
// References (docs/Semantics.md), one neuron step in f32
//===----------------------------------------------------------------------===//

struct Flags {
  bool softReset = false;
  bool detachReset = false;
};

/// One step: reads x and the states, returns h (the charge) and updates the
/// states; the caller fires and resets v (the last state).
using Charge = std::function<float(float x, std::vector<float> &states)>;

struct NeuronCase {
  const char *file;
  const char *name;
  unsigned numStates;
  unsigned membrane; // which state is v
  float vThreshold;
  float vReset;
  Charge charge;
  /// Called after the reset with (h, spike) for neurons with extra dynamics.
  std::function<void(float h, float s, std::vector<float> &states)> after;
};

float sigma(float x) { return 1.0f / (1.0f + std::exp(-x)); }

std::vector<NeuronCase> neuronCases(const Flags &flags) {
  // LIF/PLIF leak towards v_reset (set to -0.2 by the test) with a hard
  // reset, towards 0 with a soft one.
  float vr = flags.softReset ? 0.0f : -0.2f;
  return {
      {"if.mlir", "if", 1, 0, 1.0f, 0.0f,
       [](float x, std::vector<float> &s) { return s[0] + x; }, nullptr},
      {"lif.mlir", "lif", 1, 0, 1.0f, -0.2f,
       [vr](float x, std::vector<float> &s) {
         float tau = 2.0f;
         return s[0] + (x - (s[0] - vr)) / tau;
       },
       nullptr},
      {"plif.mlir", "plif", 1, 0, 1.0f, -0.2f,
       [vr](float x, std::vector<float> &s) {
         float k = sigma(0.0f); // w0 = -ln(init_tau - 1) = 0
         return s[0] + (x - (s[0] - vr)) * k;
       },
       nullptr},
      {"qif.mlir", "qif", 1, 0, 1.0f, -0.1f,
       [](float x, std::vector<float> &s) {
         float tau = 2, vc = 0.8f, a0 = 1, vrest = 0;
         float v = s[0];
         return v + (x + a0 * (v - vrest) * (v - vc)) / tau;
       },
       nullptr},
      {"eif.mlir", "eif", 1, 0, 1.0f, -0.1f,
       [](float x, std::vector<float> &s) {
         float tau = 2, dT = 1, theta = 0.8f, vrest = 0;
         float v = s[0];
         return v + (x + vrest - v + dT * std::exp((v - theta) / dT)) / tau;
       },
       nullptr},
      // States (v, w); non-default a and b are set by the test.
      {"izhikevich.mlir", "izhikevich", 2, 0, 1.0f, 0.0f,
       [](float x, std::vector<float> &s) {
         float tau = 2, vc = 0.8f, a0 = 1, vrest = -0.1f;
         float v = s[0], w = s[1];
         return v + (x + a0 * (v - vrest) * (v - vc) - w) / tau;
       },
       [](float h, float spike, std::vector<float> &s) {
         float a = 0.25f, b = 0.5f, tauW = 2, vrest = -0.1f;
         s[1] = s[1] + (a * (h - vrest) - s[1]) / tauW + b * spike;
       }},
      // States (c, v).
      {"cuba_lif.mlir", "cuba_lif", 2, 1, 0.5f, 0.0f,
       [](float x, std::vector<float> &s) {
         s[0] = s[0] * 0.5f + x;
         return s[1] * 0.75f + s[0];
       },
       nullptr},
  };
}

/// Runs a neuron for every step; fills spikes [T, N], the membrane state
/// after each step [T, N], final states, and per-neuron closeness to the
/// threshold (a 1-ulp difference there legitimately flips a spike).
struct Trajectory {
  std::vector<float> spikes, membrane;
  std::vector<std::vector<float>> finalStates; // [state][n]
  std::vector<float> closest;
};

Trajectory simulate(const NeuronCase &neuron, const Flags &flags,
                    const std::vector<float> &x,
                    const std::vector<std::vector<float>> &init, int64_t T,
                    int64_t N) {
  Trajectory out;
  out.spikes.resize(T * N);
  out.membrane.resize(T * N);
  out.finalStates.assign(neuron.numStates, std::vector<float>(N));
  out.closest.assign(N, INFINITY);
  unsigned v = neuron.membrane;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<float> states(neuron.numStates);
    for (unsigned s = 0; s < neuron.numStates; ++s)
      states[s] = init.empty() ? 0.0f : init[s][n];
    for (int64_t t = 0; t < T; ++t) {
      float h = neuron.charge(x[t * N + n], states);
      out.closest[n] =
          std::min(out.closest[n], std::fabs(h - neuron.vThreshold));
      float spike = h - neuron.vThreshold >= 0 ? 1.0f : 0.0f;
      states[v] = flags.softReset ? h - spike * neuron.vThreshold
                                  : spike * neuron.vReset + (1 - spike) * h;
      if (neuron.after)
        neuron.after(h, spike, states);
      out.spikes[t * N + n] = spike;
      out.membrane[t * N + n] = states[v];
    }
    for (unsigned s = 0; s < neuron.numStates; ++s)
      out.finalStates[s][n] = states[s];
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Storage
//===----------------------------------------------------------------------===//

uint16_t toHalf(float value) {
  llvm::APFloat f(value);
  bool lost;
  f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue());
}

float fromHalf(uint16_t bits) {
  llvm::APFloat f(llvm::APFloat::IEEEhalf(), llvm::APInt(16, bits));
  bool lost;
  f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return f.convertToFloat();
}

/// A buffer in f32 or f16 storage.
struct Storage {
  bool half;
  std::vector<float> f32;
  std::vector<uint16_t> f16;

  Storage(bool half, size_t size, float fill = NAN) : half(half) {
    if (half)
      f16.assign(size, toHalf(fill));
    else
      f32.assign(size, fill);
  }
  static Storage of(bool half, const std::vector<float> &values) {
    Storage s(half, values.size());
    for (size_t i = 0; i < values.size(); ++i)
      s.set(i, values[i]);
    return s;
  }
  void set(size_t i, float v) {
    if (half)
      f16[i] = toHalf(v);
    else
      f32[i] = v;
  }
  float get(size_t i) const { return half ? fromHalf(f16[i]) : f32[i]; }
  /// The values as stored, read back (what the kernel sees).
  std::vector<float> values() const {
    std::vector<float> out(half ? f16.size() : f32.size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = get(i);
    return out;
  }
  void *data() {
    static char empty;
    void *p = half ? static_cast<void *>(f16.data()) : f32.data();
    return p ? p : &empty;
  }
};

//===----------------------------------------------------------------------===//
// The tests
//===----------------------------------------------------------------------===//

class CpuKernelTest : public ::testing::Test {
protected:
  CpuKernelTest() {
    registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
  }

  OwningOpRef<ModuleOp> load(StringRef file) {
    std::string path = std::string(FLEXSN_NEURONS_DIR) + "/" + file.str();
    return parseSourceFile<ModuleOp>(path, context.get());
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

struct Comparison {
  int checked = 0, skipped = 0;
};

void expectClose(float got, float want, bool half, const std::string &where) {
  float tolerance =
      half ? 2e-3f * (1 + std::fabs(want)) : 1e-5f * (1 + std::fabs(want));
  EXPECT_NEAR(got, want, tolerance) << where;
}

TEST_F(CpuKernelTest, ShippedNeuronsMatchSpecReferences) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> drive(0.6f, 0.8f);
  std::normal_distribution<float> initial(0.0f, 0.3f);
  const int64_t neuronCounts[] = {1, 5, 33};
  const int64_t stepCounts[] = {0, 1, 7};
  int runs = 0;
  for (bool soft : {false, true}) {
    for (bool detach : {false, true}) {
      Flags flags{soft, detach};
      for (const NeuronCase &neuron : neuronCases(flags)) {
        OwningOpRef<ModuleOp> module = load(neuron.file);
        ASSERT_TRUE(module) << neuron.file;
        auto op = module->lookupSymbol<NeuronOp>(neuron.name);
        Builder b(context.get());
        ASSERT_FALSE(
            bool(setParamDefault(op, "soft_reset", b.getBoolAttr(soft))));
        ASSERT_FALSE(
            bool(setParamDefault(op, "detach_reset", b.getBoolAttr(detach))));
        if (StringRef(neuron.name) == "lif" ||
            StringRef(neuron.name) == "plif") {
          ASSERT_FALSE(
              bool(setParamDefault(op, "v_reset", b.getF32FloatAttr(-0.2f))));
        }
        if (StringRef(neuron.name) == "izhikevich") {
          ASSERT_FALSE(
              bool(setParamDefault(op, "a", b.getF32FloatAttr(0.25f))));
          ASSERT_FALSE(bool(setParamDefault(op, "b", b.getF32FloatAttr(0.5f))));
        }
        for (bool half : {false, true}) {
          for (KernelVariant variant :
               {KernelVariant::Inference, KernelVariant::FinalState}) {
            Type dtype = half ? Type(b.getF16Type()) : Type(b.getF32Type());
            auto kernel =
                CpuKernel::compile(*module, neuron.name, variant, dtype);
            ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
            bool final = variant == KernelVariant::FinalState;
            for (int64_t T : stepCounts) {
              int64_t N = neuronCounts[runs++ % 3];
              std::vector<float> xs(T * N);
              for (float &x : xs)
                x = drive(rng);
              Storage x = Storage::of(half, xs);
              std::vector<Storage> inits;
              std::vector<std::vector<float>> initValues;
              for (unsigned s = 0; s < neuron.numStates; ++s) {
                std::vector<float> v(N);
                for (float &e : v)
                  e = initial(rng);
                inits.push_back(Storage::of(half, v));
                initValues.push_back(inits.back().values());
              }
              Storage spikes(half, T * N);
              std::vector<Storage> states;
              for (unsigned s = 0; s < neuron.numStates; ++s)
                states.emplace_back(half, final ? N : T * N);

              std::vector<KernelBuffer> buffers = {{x.data(), {T, N}}};
              for (Storage &init : inits)
                buffers.push_back({init.data(), {N}});
              buffers.push_back({spikes.data(), {T, N}});
              for (Storage &state : states)
                buffers.push_back(
                    {state.data(), final ? SmallVector<int64_t, 2>{N}
                                         : SmallVector<int64_t, 2>{T, N}});
              // Runtime parameters (PLIF's trainable w) at their defaults.
              SmallVector<TypedAttr> params;
              for (ParamAttr param : op.getRuntimeParamAttrs())
                params.push_back(param.getDefaultValue());
              llvm::Error error = (*kernel)->run(buffers, params);
              ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));

              Trajectory want =
                  simulate(neuron, flags, x.values(), initValues, T, N);
              std::string where =
                  std::string(neuron.name) + (soft ? " soft" : " hard") +
                  (detach ? " detach" : "") + (half ? " f16" : " f32") +
                  " T=" + std::to_string(T) + " N=" + std::to_string(N);
              int skipped = 0;
              for (int64_t n = 0; n < N; ++n) {
                // States stay f32 inside the kernel whatever the storage,
                // so only neurons within rounding of the threshold may
                // legitimately differ.
                if (want.closest[n] < 1e-4f) {
                  ++skipped;
                  continue;
                }
                for (int64_t t = 0; t < T; ++t) {
                  EXPECT_EQ(spikes.get(t * N + n), want.spikes[t * N + n])
                      << where << " spike t=" << t << " n=" << n;
                  if (!final)
                    expectClose(states[neuron.membrane].get(t * N + n),
                                want.membrane[t * N + n], half,
                                where + " v t=" + std::to_string(t));
                }
                if (final)
                  for (unsigned s = 0; s < neuron.numStates; ++s)
                    expectClose(states[s].get(n), want.finalStates[s][n], half,
                                where + " final state " + std::to_string(s));
              }
              EXPECT_LE(skipped, std::max<int64_t>(1, N / 10)) << where;
            }
          }
        }
      }
    }
  }
}

// Runtime parameters are kernel arguments: one compiled kernel serves
// every value, and results follow the value passed.
TEST_F(CpuKernelTest, RuntimeParametersAreArguments) {
  const char *source = R"mlir(
    flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(spike)
        params(%tau: f32 = 2.0 runtime, %v_threshold: f32 = 1.0 runtime) {
      %dv = arith.subf %x, %v : f32
      %inc = arith.divf %dv, %tau : f32
      %h = arith.addf %v, %inc : f32
      %d = arith.subf %h, %v_threshold : f32
      %s = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
      %one = arith.constant 1.0 : f32
      %keep = arith.subf %one, %s : f32
      %v1 = arith.mulf %keep, %h : f32
      flexsn.yield %s, %v1 : f32, f32
    })mlir";
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, context.get());
  ASSERT_TRUE(module);
  Builder b(context.get());
  auto kernel = CpuKernel::compile(*module, "leaky", KernelVariant::FinalState,
                                   b.getF32Type());
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  ASSERT_EQ((*kernel)->getParamTypes().size(), 2u);

  const int64_t T = 3, N = 2;
  std::vector<float> x = {0.5f, 2.0f, 0.5f, 2.0f, 0.5f, 2.0f};
  for (float tau : {1.5f, 4.0f}) {
    for (float threshold : {0.4f, 10.0f}) {
      std::vector<float> spikes(T * N, NAN), v(N, NAN);
      std::vector<KernelBuffer> buffers = {{x.data(), {T, N}},
                                           {nullptr, {N}},
                                           {spikes.data(), {T, N}},
                                           {v.data(), {N}}};
      ASSERT_FALSE(bool((*kernel)->run(
          buffers, {b.getF32FloatAttr(tau), b.getF32FloatAttr(threshold)})));
      for (int64_t n = 0; n < N; ++n) {
        float state = 0;
        for (int64_t t = 0; t < T; ++t) {
          float h = state + (x[t * N + n] - state) / tau;
          float s = h - threshold >= 0 ? 1.0f : 0.0f;
          EXPECT_EQ(spikes[t * N + n], s)
              << "tau=" << tau << " th=" << threshold;
          state = (1 - s) * h;
        }
        EXPECT_FLOAT_EQ(v[n], state) << "tau=" << tau << " th=" << threshold;
      }
    }
  }
}

// A null buffer is absent: a null initial state reads as zeros and a null
// result is not written (its neighbours are untouched).
TEST_F(CpuKernelTest, AbsentBuffersReadAsZerosAndAreNotWritten) {
  OwningOpRef<ModuleOp> module = load("if.mlir");
  ASSERT_TRUE(module);
  Builder b(context.get());
  auto kernel = CpuKernel::compile(*module, "if", KernelVariant::Inference,
                                   b.getF32Type());
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  const int64_t T = 4, N = 3;
  std::vector<float> x = {0.3f, 0.6f, 1.2f, 0.3f, 0.6f, 1.2f,
                          0.3f, 0.6f, 1.2f, 0.3f, 0.6f, 1.2f};
  std::vector<float> spikes(T * N, -7.0f);
  std::vector<float> v(T * N, -7.0f);
  // Spikes absent: only the state sequence is written.
  ASSERT_FALSE(bool((*kernel)->run({{x.data(), {T, N}},
                                    {nullptr, {N}},
                                    {nullptr, {T, N}},
                                    {v.data(), {T, N}}},
                                   {})));
  for (float s : spikes)
    EXPECT_EQ(s, -7.0f);
  // IF from zero: v accumulates x until it reaches 1, then resets to 0.
  for (int64_t n = 0; n < N; ++n) {
    float state = 0;
    for (int64_t t = 0; t < T; ++t) {
      float h = state + x[t * N + n];
      state = h >= 1.0f ? 0.0f : h;
      EXPECT_FLOAT_EQ(v[t * N + n], state) << "t=" << t << " n=" << n;
    }
  }
}

// T = 0 launches nothing: the final state equals the initial one.
TEST_F(CpuKernelTest, ZeroStepsKeepInitialState) {
  OwningOpRef<ModuleOp> module = load("cuba_lif.mlir");
  ASSERT_TRUE(module);
  Builder b(context.get());
  auto kernel = CpuKernel::compile(*module, "cuba_lif",
                                   KernelVariant::FinalState, b.getF32Type());
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  const int64_t N = 3;
  std::vector<float> c0 = {0.1f, -0.2f, 0.3f}, v0 = {0.4f, 0.0f, -0.5f};
  std::vector<float> c(N, NAN), v(N, NAN);
  static float none;
  ASSERT_FALSE(bool((*kernel)->run({{&none, {0, N}},
                                    {c0.data(), {N}},
                                    {v0.data(), {N}},
                                    {&none, {0, N}},
                                    {c.data(), {N}},
                                    {v.data(), {N}}},
                                   {})));
  EXPECT_EQ(c, c0);
  EXPECT_EQ(v, v0);
}

TEST_F(CpuKernelTest, BadArgumentsAreReported) {
  OwningOpRef<ModuleOp> module = load("if.mlir");
  ASSERT_TRUE(module);
  Builder b(context.get());
  auto missing = CpuKernel::compile(*module, "nope", KernelVariant::Inference,
                                    b.getF32Type());
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no neuron named 'nope'"),
            std::string::npos);
  auto op = module->lookupSymbol<NeuronOp>("if");
  llvm::Error unknown = setParamDefault(op, "tau", b.getF32FloatAttr(1));
  EXPECT_NE(llvm::toString(std::move(unknown)).find("no parameter 'tau'"),
            std::string::npos);
  llvm::Error wrongType =
      setParamDefault(op, "soft_reset", b.getF32FloatAttr(1));
  EXPECT_TRUE(bool(wrongType));
  llvm::consumeError(std::move(wrongType));

  auto kernel = CpuKernel::compile(*module, "if", KernelVariant::Inference,
                                   b.getF32Type());
  ASSERT_TRUE(bool(kernel));
  llvm::Error tooFew = (*kernel)->run({}, {});
  EXPECT_NE(llvm::toString(std::move(tooFew)).find("expected 4 buffers"),
            std::string::npos);

  // Training kernels are checked against their signature too: the forward
  // kernel takes its saved sequence last, a [T, N] buffer.
  auto forward =
      CpuKernel::compile(*module, "if", KernelVariant::Forward, b.getF32Type());
  ASSERT_TRUE(bool(forward));
  ArrayRef<KernelBufferAttr> specs = (*forward)->getSignature().getBuffers();
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(specs.back().getRole(), BufferRole::SavedOutput);
  std::vector<float> data(8);
  SmallVector<KernelBuffer> buffers = {{data.data(), {2, 1}},
                                       {data.data(), {1}},
                                       {data.data(), {2, 1}},
                                       {data.data(), {2, 1}},
                                       {data.data(), {2}}};
  llvm::Error wrongRank = (*forward)->run(buffers, {});
  EXPECT_NE(llvm::toString(std::move(wrongRank))
                .find("buffer #4 ('saved0') must have rank 2"),
            std::string::npos);
  buffers.pop_back();
  llvm::Error noWorkspace = (*forward)->run(buffers, {});
  EXPECT_NE(llvm::toString(std::move(noWorkspace)).find("expected 5 buffers"),
            std::string::npos);
}

} // namespace
