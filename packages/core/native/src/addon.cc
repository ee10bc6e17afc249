// N-API glue for attnlab's native kernels (plain node_api.h from Node's own headers: no
// node-addon-api, no node-gyp needed). Every function takes Float32Array/Int32Array views (for
// example views of the tfjs wasm heap) plus sizes and computes in place; no allocation crosses
// the boundary. Each array's length is checked against what the kernel will touch, so a wrong
// size throws a RangeError instead of corrupting memory.
#define NAPI_VERSION 8
#include <node_api.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
// Flush-to-zero + denormals-are-zero while a kernel runs (restored afterwards, so Node's own
// float semantics are untouched): denormal operands make x86 arithmetic 30-100x slower, and
// near-sparse attention (softmax of large-margin scores) produces them.
struct DenormalGuard {
  unsigned saved = _mm_getcsr();
  DenormalGuard() { _mm_setcsr(saved | 0x8040); }
  ~DenormalGuard() { _mm_setcsr(saved); }
};
#else
struct DenormalGuard {};
#endif

namespace {

// Thrown as a C++ exception inside this file only, turned into a JS RangeError/TypeError.
struct ArgError {
  std::string message;
  bool range;
};

struct Args {
  napi_env env;
  napi_value argv[16];
  size_t argc = 16;
  Args(napi_env e, napi_callback_info info) : env(e) {
    napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  }
  napi_value at(size_t i) const {
    if (i >= argc) throw ArgError{"missing argument " + std::to_string(i), false};
    return argv[i];
  }
  bool isNull(size_t i) const {
    napi_valuetype t;
    napi_typeof(env, at(i), &t);
    return t == napi_null || t == napi_undefined;
  }
  void* array(size_t i, napi_typedarray_type want, int64_t need) const {
    bool is = false;
    napi_is_typedarray(env, at(i), &is);
    if (!is) throw ArgError{"argument " + std::to_string(i) + " must be a typed array", false};
    napi_typedarray_type type;
    size_t length = 0, offset = 0;
    void* data = nullptr;
    napi_value buffer;
    napi_get_typedarray_info(env, at(i), &type, &length, &data, &buffer, &offset);
    if (type != want) {
      throw ArgError{"argument " + std::to_string(i) + (want == napi_float32_array ? " must be a Float32Array" : " must be an Int32Array"), false};
    }
    if (need < 0 || (int64_t)length < need) {
      throw ArgError{"argument " + std::to_string(i) + " has " + std::to_string(length) + " elements, the kernel needs " + std::to_string(need), true};
    }
    return data;
  }
  float* f32(size_t i, int64_t need) const { return static_cast<float*>(array(i, napi_float32_array, need)); }
  int32_t* i32(size_t i, int64_t need) const { return static_cast<int32_t*>(array(i, napi_int32_array, need)); }
  float* f32OrNull(size_t i, int64_t need) const { return isNull(i) ? nullptr : f32(i, need); }
  double num(size_t i) const {
    double v = 0;
    if (napi_get_value_double(env, at(i), &v) != napi_ok) throw ArgError{"argument " + std::to_string(i) + " must be a number", false};
    return v;
  }
  int integer(size_t i) const {
    const double v = num(i);
    if (!(v >= 0 && v <= 2147483647.0) || v != (double)(int64_t)v) throw ArgError{"argument " + std::to_string(i) + " must be a non-negative integer", true};
    return (int)v;
  }
  bool flag(size_t i) const {
    bool v = false;
    if (napi_get_value_bool(env, at(i), &v) != napi_ok) throw ArgError{"argument " + std::to_string(i) + " must be a boolean", false};
    return v;
  }
};

napi_value undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

template <typename F>
napi_value guarded(napi_env env, F&& body) {
  try {
    DenormalGuard guard;
    return body();
  } catch (const ArgError& e) {
    if (e.range) napi_throw_range_error(env, nullptr, e.message.c_str());
    else napi_throw_type_error(env, nullptr, e.message.c_str());
    return nullptr;
  }
}

#define KERNEL(name) napi_value name(napi_env env, napi_callback_info info)

// gemm(transA, transB, batch, m, n, k, a, strideA, b, strideB, c)
KERNEL(Gemm) {
  return guarded(env, [&] {
    Args a(env, info);
    const bool tA = a.flag(0), tB = a.flag(1);
    const int batch = a.integer(2), M = a.integer(3), N = a.integer(4), K = a.integer(5);
    const int64_t sA = (int64_t)a.num(7), sB = (int64_t)a.num(9);
    const int64_t needA = (batch - 1) * sA + (int64_t)M * K, needB = (batch - 1) * sB + (int64_t)K * N;
    attn::gemm(tA, tB, batch, M, N, K, a.f32(6, needA), sA, a.f32(8, needB), sB, a.f32(10, (int64_t)batch * M * N));
    return undefined(env);
  });
}

// softmax(x, y, rows, cols)
KERNEL(Softmax) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(2), cols = a.integer(3);
    const int64_t n = (int64_t)rows * cols;
    attn::softmaxRows(a.f32(0, n), a.f32(1, n), rows, cols);
    return undefined(env);
  });
}

// gatherRows(table, indices, out, n, k, width, rows): rows = the table's row count (index check)
KERNEL(GatherRows) {
  return guarded(env, [&] {
    Args a(env, info);
    const int n = a.integer(3), k = a.integer(4), width = a.integer(5), rows = a.integer(6);
    const int32_t* indices = a.i32(1, (int64_t)n * k);
    for (int64_t i = 0; i < (int64_t)n * k; i++)
      if (indices[i] < 0 || indices[i] >= rows) throw ArgError{"row index " + std::to_string(indices[i]) + " is out of range", true};
    attn::gatherRows(a.f32(0, (int64_t)rows * width), indices, a.f32(2, (int64_t)n * width), n, k, width);
    return undefined(env);
  });
}

// scatterRows(updates, indices, out, n, k, width, rows)
KERNEL(ScatterRows) {
  return guarded(env, [&] {
    Args a(env, info);
    const int n = a.integer(3), k = a.integer(4), width = a.integer(5), rows = a.integer(6);
    const int32_t* indices = a.i32(1, (int64_t)n * k);
    for (int64_t i = 0; i < (int64_t)n * k; i++)
      if (indices[i] < 0 || indices[i] >= rows) throw ArgError{"row index " + std::to_string(indices[i]) + " is out of range", true};
    attn::scatterRows(a.f32(0, (int64_t)n * width), indices, a.f32(2, (int64_t)rows * width), n, k, width, rows);
    return undefined(env);
  });
}

// addBias(c, rows, cols, bias)
KERNEL(AddBias) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(1), cols = a.integer(2);
    attn::addBias(a.f32(0, (int64_t)rows * cols), rows, cols, a.f32(3, cols));
    return undefined(env);
  });
}

// add(a, b, out, n): out = a + b
KERNEL(Add) {
  return guarded(env, [&] {
    Args a(env, info);
    const int n = a.integer(3);
    attn::addArrays(a.f32(0, n), a.f32(1, n), a.f32(2, n), n);
    return undefined(env);
  });
}

// columnSum(x, out, rows, cols)
KERNEL(ColumnSum) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(2), cols = a.integer(3);
    attn::columnSum(a.f32(0, (int64_t)rows * cols), a.f32(1, cols), rows, cols);
    return undefined(env);
  });
}

// geluForward(x, y, n)
KERNEL(GeluForward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int n = a.integer(2);
    attn::geluForward(a.f32(0, n), a.f32(1, n), n);
    return undefined(env);
  });
}

// geluBackward(x, dy, dx, n)
KERNEL(GeluBackward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int n = a.integer(3);
    attn::geluBackward(a.f32(0, n), a.f32(1, n), a.f32(2, n), n);
    return undefined(env);
  });
}

// layerNormForward(x, gain, bias | null, y, mean, rstd, rows, cols, eps)
KERNEL(LayerNormForward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(6), cols = a.integer(7);
    const int64_t n = (int64_t)rows * cols;
    attn::layerNormForward(a.f32(0, n), a.f32(1, cols), a.f32OrNull(2, cols), a.f32(3, n), a.f32(4, rows), a.f32(5, rows), rows, cols, (float)a.num(8));
    return undefined(env);
  });
}

// layerNormBackward(x, gain, mean, rstd, dy, dx, dGain, dBias | null, rows, cols)
KERNEL(LayerNormBackward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(8), cols = a.integer(9);
    const int64_t n = (int64_t)rows * cols;
    attn::layerNormBackward(a.f32(0, n), a.f32(1, cols), a.f32(2, rows), a.f32(3, rows), a.f32(4, n), a.f32(5, n), a.f32(6, cols), a.f32OrNull(7, cols), rows, cols);
    return undefined(env);
  });
}

// attentionForward(qkv, out, lse, batch, pos, nHeads, dHead, scale, causal): lse [batch, nHeads, pos]
KERNEL(AttentionForward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int B = a.integer(3), T = a.integer(4), H = a.integer(5), dh = a.integer(6);
    const int64_t rows = (int64_t)B * T, width = (int64_t)H * dh;
    attn::attentionForward(a.f32(0, rows * 3 * width), a.f32(1, rows * width), a.f32(2, (int64_t)B * H * T), B, T,
                           H, dh, (float)a.num(7), a.flag(8));
    return undefined(env);
  });
}

// attentionBackward(qkv, lse, dOut, dQkv, batch, pos, nHeads, dHead, scale, causal, out | null):
// out is the forward's output (the tile kernels' D = rowsum(dO o out)); null runs the row kernels.
KERNEL(AttentionBackward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int B = a.integer(4), T = a.integer(5), H = a.integer(6), dh = a.integer(7);
    const int64_t rows = (int64_t)B * T, width = (int64_t)H * dh;
    attn::attentionBackward(a.f32(0, rows * 3 * width), a.f32(1, (int64_t)B * H * T), a.f32(2, rows * width),
                            a.argc > 10 ? a.f32OrNull(10, rows * width) : nullptr, a.f32(3, rows * 3 * width), B, T, H, dh, (float)a.num(8),
                            a.flag(9));
    return undefined(env);
  });
}

// sparseAttention(q, k, v, out, tileStarts, spans, heads, group, rows, keys, dHead, dValue, tileRows,
// scale, causalOffset): spans are checked (in range, ascending) before any work.
KERNEL(SparseAttention) {
  return guarded(env, [&] {
    Args a(env, info);
    attn::SparseShape s{};
    s.heads = a.integer(6);
    s.group = a.integer(7);
    s.rows = a.integer(8);
    s.keys = a.integer(9);
    s.dh = a.integer(10);
    s.dv = a.integer(11);
    s.tileRows = a.integer(12);
    s.scale = (float)a.num(13);
    s.causalOffset = (int64_t)a.integer(14);
    if (s.group < 1 || s.tileRows < 1 || s.heads % s.group != 0)
      throw ArgError{"group and tileRows must be >= 1 and group must divide heads", true};
    const int64_t kvHeads = s.heads / s.group;
    const int64_t tiles = ((int64_t)s.rows + s.tileRows - 1) / s.tileRows;
    const int32_t* starts = a.i32(4, s.heads * tiles + 1);
    const int64_t spanCount = starts[s.heads * tiles];
    const int32_t* spans = a.i32(5, 2 * spanCount);
    for (int64_t u = 0; u < s.heads * tiles; u++) {
      if (starts[u] < 0 || starts[u + 1] < starts[u] || starts[u + 1] > spanCount)
        throw ArgError{"tileStarts must be non-decreasing in [0, spans]", true};
      int64_t previous = 0;
      for (int64_t i = starts[u]; i < starts[u + 1]; i++) {
        if (spans[2 * i] < previous || spans[2 * i + 1] < spans[2 * i] || spans[2 * i + 1] > s.keys)
          throw ArgError{"spans must be ascending, disjoint and within [0, keys]", true};
        previous = spans[2 * i + 1];
      }
    }
    attn::sparseAttention(a.f32(0, s.heads * s.rows * s.dh), a.f32(1, kvHeads * s.keys * s.dh),
                          a.f32(2, kvHeads * s.keys * s.dv), a.f32(3, s.heads * s.rows * s.dv), starts, spans, s);
    return undefined(env);
  });
}

// pageSelect(q, bounds, chosen, heads, group, pages, capacity, dHead, budget, share)
KERNEL(PageSelect) {
  return guarded(env, [&] {
    Args a(env, info);
    attn::PageShape s{};
    s.heads = a.integer(3);
    s.group = a.integer(4);
    s.pages = a.integer(5);
    s.capacity = a.integer(6);
    s.dh = a.integer(7);
    s.budget = a.integer(8);
    s.share = a.flag(9);
    if (s.group < 1 || s.heads % s.group != 0 || s.pages < 0 || s.capacity < s.pages || s.budget < 0)
      throw ArgError{"group must divide heads and 0 <= pages <= capacity, budget >= 0", true};
    const int64_t kvRows = s.heads / s.group;
    attn::pageSelect(a.f32(0, s.heads * s.dh), a.f32(1, kvRows * 2 * s.dh * s.capacity), a.i32(2, s.heads * s.budget),
                     s);
    return undefined(env);
  });
}

// softmaxCrossEntropy(logits, labels, weights, rows, cols) -> loss
KERNEL(SoftmaxCrossEntropy) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(3), cols = a.integer(4);
    const double loss = attn::softmaxCrossEntropy(a.f32(0, (int64_t)rows * cols), a.i32(1, rows), a.f32(2, rows), rows, cols);
    napi_value result;
    napi_create_double(env, loss, &result);
    return result;
  });
}

// softmaxCrossEntropyBackward(logits, labels, weights, rows, cols, dLoss, dLogits)
KERNEL(SoftmaxCrossEntropyBackward) {
  return guarded(env, [&] {
    Args a(env, info);
    const int rows = a.integer(3), cols = a.integer(4);
    const int64_t n = (int64_t)rows * cols;
    attn::softmaxCrossEntropyBackward(a.f32(0, n), a.i32(1, rows), a.f32(2, rows), rows, cols, (float)a.num(5), a.f32(6, n));
    return undefined(env);
  });
}

attn::OneHotShape oneHotShape(const Args& a, size_t first) {
  attn::OneHotShape s;
  s.B = a.integer(first);
  s.T = a.integer(first + 1);
  s.H = a.integer(first + 2);
  s.D = a.integer(first + 3);
  s.dV = a.integer(first + 4);
  s.d = a.integer(first + 5);
  s.c = a.integer(first + 6);
  s.scale = (float)a.num(first + 7);
  s.from = a.integer(first + 8);
  if (s.d + s.T > s.D || s.c > s.dV || s.from >= s.T) throw ArgError{"inconsistent one-hot attention sizes", true};
  return s;
}

// oneHotAttentionForward(tokens, wq, wv, logits, probs, batch, pos, nHeads, dModel, dValue, dVocab, outCols, scale, from)
KERNEL(OneHotAttentionForward) {
  return guarded(env, [&] {
    Args a(env, info);
    const attn::OneHotShape s = oneHotShape(a, 5);
    const int32_t* tokens = a.i32(0, (int64_t)s.B * s.T);
    for (int64_t i = 0; i < (int64_t)s.B * s.T; i++)
      if (tokens[i] < 0 || tokens[i] >= s.d) throw ArgError{"token " + std::to_string(tokens[i]) + " is out of range", true};
    attn::oneHotAttentionForward(tokens, a.f32(1, (int64_t)s.H * s.D * s.D), a.f32(2, (int64_t)s.H * s.D * s.dV), a.f32(3, (int64_t)s.B * (s.T - s.from) * s.c), a.f32(4, (int64_t)s.B * s.H * s.T * s.T), s);
    return undefined(env);
  });
}

// oneHotAttentionBackward(tokens, wq, wv, probs, dLogits, dWq, dWv, batch, pos, nHeads, dModel, dValue, dVocab, outCols, scale, from)
KERNEL(OneHotAttentionBackward) {
  return guarded(env, [&] {
    Args a(env, info);
    const attn::OneHotShape s = oneHotShape(a, 7);
    const int32_t* tokens = a.i32(0, (int64_t)s.B * s.T);
    for (int64_t i = 0; i < (int64_t)s.B * s.T; i++)
      if (tokens[i] < 0 || tokens[i] >= s.d) throw ArgError{"token " + std::to_string(tokens[i]) + " is out of range", true};
    const int64_t nq = (int64_t)s.H * s.D * s.D, nv = (int64_t)s.H * s.D * s.dV;
    attn::oneHotAttentionBackward(tokens, a.f32(1, nq), a.f32(2, nv), a.f32(3, (int64_t)s.B * s.H * s.T * s.T), a.f32(4, (int64_t)s.B * (s.T - s.from) * s.c), a.f32(5, nq), a.f32(6, nv), s);
    return undefined(env);
  });
}

// adamw(p, g, m, v, n, lr, beta1, beta2, eps, weightDecay, step)
KERNEL(AdamW) {
  return guarded(env, [&] {
    Args a(env, info);
    const int n = a.integer(4);
    attn::adamw(a.f32(0, n), a.f32(1, n), a.f32(2, n), a.f32(3, n), n, (float)a.num(5), (float)a.num(6), (float)a.num(7), (float)a.num(8), (float)a.num(9), a.integer(10));
    return undefined(env);
  });
}

// setThreads(n)
KERNEL(SetThreads) {
  return guarded(env, [&] {
    Args a(env, info);
    attn::setThreads(a.integer(0));
    return undefined(env);
  });
}

// info() -> { threads, openmp, cpuLevel, abi }
KERNEL(Info) {
  napi_value o, threads, openmp, level, abi;
  napi_create_object(env, &o);
  napi_create_int32(env, attn::getThreads(), &threads);
  napi_get_boolean(env, attn::haveOpenMP(), &openmp);
  napi_create_string_utf8(env, attn::cpuLevel(), NAPI_AUTO_LENGTH, &level);
  napi_create_int32(env, 1, &abi);
  napi_set_named_property(env, o, "threads", threads);
  napi_set_named_property(env, o, "openmp", openmp);
  napi_set_named_property(env, o, "cpuLevel", level);
  napi_set_named_property(env, o, "abi", abi);
  (void)info;
  return o;
}

napi_value Init(napi_env env, napi_value exports) {
  const napi_property_descriptor properties[] = {
      {"gemm", nullptr, Gemm, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmax", nullptr, Softmax, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"gatherRows", nullptr, GatherRows, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"scatterRows", nullptr, ScatterRows, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"addBias", nullptr, AddBias, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"columnSum", nullptr, ColumnSum, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"add", nullptr, Add, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"geluForward", nullptr, GeluForward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"geluBackward", nullptr, GeluBackward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"layerNormForward", nullptr, LayerNormForward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"layerNormBackward", nullptr, LayerNormBackward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"attentionForward", nullptr, AttentionForward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"attentionBackward", nullptr, AttentionBackward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmaxCrossEntropy", nullptr, SoftmaxCrossEntropy, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmaxCrossEntropyBackward", nullptr, SoftmaxCrossEntropyBackward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"oneHotAttentionForward", nullptr, OneHotAttentionForward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"oneHotAttentionBackward", nullptr, OneHotAttentionBackward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sparseAttention", nullptr, SparseAttention, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"pageSelect", nullptr, PageSelect, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"adamw", nullptr, AdamW, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setThreads", nullptr, SetThreads, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"info", nullptr, Info, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof(properties) / sizeof(properties[0]), properties);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
