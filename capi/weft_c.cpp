// The C API (weft_c.h) over weft's C++ one. Every entry point runs its body inside guarded(),
// which turns a C++ exception into a status and a per-thread message, so none crosses into C.
#include "weft_c.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "models/all.h"

using namespace weft;

struct weft_tensor {
  Tensor value;
};

struct weft_model {
  models::PretrainedModel pretrained;
  models::Tokenizer tokenizer;
};

namespace {

thread_local std::string last_error;

template <class F>
weft_status guarded(F&& body) {
  try {
    body();
    return WEFT_OK;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return WEFT_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = e.what();
    return WEFT_ERROR;
  } catch (...) {
    last_error = "unknown error";
    return WEFT_ERROR;
  }
}

weft_status invalid(const std::string& message) {
  last_error = message;
  return WEFT_INVALID_ARGUMENT;
}

// The C enum's dtypes, in its order.
constexpr DType kDTypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16, DType::Int64, DType::Int32,
                             DType::Int8, DType::UInt8, DType::Bool};

bool valid_dtype(weft_dtype d) { return static_cast<int>(d) >= 0 && static_cast<int>(d) < 9; }

weft_dtype c_dtype(DType d) {
  for (int i = 0; i < 9; ++i)
    if (kDTypes[i] == d) return static_cast<weft_dtype>(i);
  return WEFT_FLOAT32;
}

// Options structs from callers built against an older, shorter version keep the defaults for the
// fields they do not have.
template <class Options>
Options read_options(const Options* given, const Options& defaults) {
  Options out = defaults;
  if (given != nullptr) std::memcpy(&out, given, std::min(given->struct_size, sizeof(Options)));
  out.struct_size = sizeof(Options);
  return out;
}

}  // namespace

extern "C" {

const char* weft_last_error(void) { return last_error.c_str(); }
const char* weft_version(void) { return "0.1.0"; }

const char* weft_cpu_kernel(void) {
  static thread_local std::string name;
  name = std::string(cpu_isa_name(cpu_isa()));
  return name.c_str();
}

weft_status weft_set_num_threads(int threads) {
  if (threads < 1) return invalid("weft_set_num_threads: expected at least 1 thread, got " + std::to_string(threads));
  return guarded([&] { set_num_threads(threads); });
}

weft_status weft_tensor_create(const void* data, const int64_t* shape, int ndim, weft_dtype dtype, weft_tensor** out) {
  if (out == nullptr || (ndim > 0 && shape == nullptr) || ndim < 0 || !valid_dtype(dtype))
    return invalid("weft_tensor_create: expected a shape of ndim >= 0 entries, a valid dtype and an output pointer");
  *out = nullptr;
  Shape s(shape, shape + ndim);
  for (int64_t d : s)
    if (d < 0) return invalid("weft_tensor_create: a dimension is negative");
  return guarded([&] {
    const Tensor t = empty(s, kDTypes[dtype]);
    if (t.nbytes() > 0) {
      WEFT_CHECK(data != nullptr, "weft_tensor_create: data is NULL for a tensor of ", t.nbytes(), " bytes");
      std::memcpy(t.data_ptr(), data, t.nbytes());
    }
    *out = new weft_tensor{t};
  });
}

void weft_tensor_free(weft_tensor* tensor) { delete tensor; }
int weft_tensor_ndim(const weft_tensor* tensor) { return tensor ? static_cast<int>(tensor->value.dim()) : -1; }
int64_t weft_tensor_size(const weft_tensor* tensor, int dim) {
  return tensor && dim >= 0 && dim < tensor->value.dim() ? tensor->value.size(dim) : -1;
}
weft_dtype weft_tensor_dtype(const weft_tensor* tensor) { return tensor ? c_dtype(tensor->value.dtype()) : WEFT_FLOAT32; }
int64_t weft_tensor_numel(const weft_tensor* tensor) { return tensor ? tensor->value.numel() : -1; }

weft_status weft_tensor_copy_out(const weft_tensor* tensor, weft_dtype dtype, void* data, size_t capacity) {
  if (tensor == nullptr || !valid_dtype(dtype)) return invalid("weft_tensor_copy_out: a null tensor or an invalid dtype");
  const size_t needed = static_cast<size_t>(tensor->value.numel()) * itemsize(kDTypes[dtype]);
  if (needed > capacity || (needed > 0 && data == nullptr))
    return invalid("weft_tensor_copy_out: " + std::to_string(needed) + " bytes needed, the buffer has " +
                   std::to_string(capacity));
  return guarded([&] {
    const Tensor t = tensor->value.to(kDTypes[dtype]).contiguous();
    if (needed > 0) std::memcpy(data, t.data_ptr(), needed);
  });
}

weft_status weft_model_load(const char* dir, const weft_load_options* options, weft_model** out) {
  if (dir == nullptr || out == nullptr) return invalid("weft_model_load: dir and out must not be NULL");
  *out = nullptr;
  const weft_load_options o = read_options(options, weft_load_options{sizeof(weft_load_options), nullptr, 0});
  return guarded([&] {
    models::PretrainedOptions load;
    load.quantize = o.quantize ? o.quantize : "";
    load.dtype = o.bfloat16 ? kBFloat16 : kFloat32;
    auto tokenizer = models::Tokenizer::from_folder(dir);
    auto pretrained = models::from_pretrained(dir, load);
    *out = new weft_model{std::move(pretrained), std::move(tokenizer)};
  });
}

void weft_model_free(weft_model* model) { delete model; }
int64_t weft_model_vocab_size(const weft_model* model) {
  return model ? model->pretrained.model->lm_shape().vocab_size : -1;
}
int64_t weft_model_max_positions(const weft_model* model) {
  return model ? model->pretrained.model->lm_shape().max_positions : -1;
}

weft_status weft_tokenize(const weft_model* model, const char* text, int add_special_tokens, int64_t* ids,
                          size_t capacity, size_t* count) {
  if (model == nullptr || text == nullptr || count == nullptr || (capacity > 0 && ids == nullptr))
    return invalid("weft_tokenize: model, text and count must not be NULL (ids only with capacity 0)");
  return guarded([&] {
    const std::vector<int32_t> encoded = model->tokenizer.encode(text, add_special_tokens != 0);
    *count = encoded.size();
    if (capacity == 0) return;
    WEFT_CHECK(capacity >= encoded.size(), "weft_tokenize: ", encoded.size(), " ids do not fit in a buffer of ", capacity);
    std::copy(encoded.begin(), encoded.end(), ids);
  });
}

weft_status weft_detokenize(const weft_model* model, const int64_t* ids, size_t count, int skip_special_tokens,
                            char* text, size_t capacity, size_t* length) {
  if (model == nullptr || length == nullptr || (count > 0 && ids == nullptr) || (capacity > 0 && text == nullptr))
    return invalid("weft_detokenize: model, ids (when count > 0), text (when capacity > 0) and length must not be NULL");
  return guarded([&] {
    std::vector<int32_t> narrow(count);
    for (size_t i = 0; i < count; ++i) {
      WEFT_CHECK(ids[i] >= 0 && ids[i] <= INT32_MAX, "weft_detokenize: id ", ids[i], " is not a token id");
      narrow[i] = static_cast<int32_t>(ids[i]);
    }
    const std::string decoded = model->tokenizer.decode(narrow, skip_special_tokens != 0);
    *length = decoded.size();
    if (capacity == 0) return;
    WEFT_CHECK(capacity > decoded.size(), "weft_detokenize: ", decoded.size() + 1, " bytes needed, the buffer has ",
               capacity);
    std::memcpy(text, decoded.c_str(), decoded.size() + 1);
  });
}

void weft_generate_options_init(weft_generate_options* options) {
  if (options == nullptr) return;
  *options = weft_generate_options{sizeof(weft_generate_options), 64, 1, 1.0, 0, 1.0, 0, 0};
}

weft_status weft_generate(weft_model* model, const int64_t* prompt, size_t prompt_length,
                          const weft_generate_options* options, weft_token_callback callback, void* user_data,
                          int64_t* out_ids, size_t capacity, size_t* count) {
  if (model == nullptr || prompt == nullptr || count == nullptr || (capacity > 0 && out_ids == nullptr))
    return invalid("weft_generate: model, prompt and count must not be NULL (out_ids only with capacity 0)");
  weft_generate_options defaults;
  weft_generate_options_init(&defaults);
  const weft_generate_options o = read_options(options, defaults);
  return guarded([&] {
    models::GenerateOptions g;
    g.max_new_tokens = o.max_new_tokens;
    g.sampling.greedy = o.greedy != 0;
    g.sampling.temperature = o.temperature;
    g.sampling.top_k = o.top_k;
    g.sampling.top_p = o.top_p;
    g.seed = o.seed;
    g.kv_dtype = o.kv_cache_bfloat16 ? kBFloat16 : kFloat32;
    models::TextStream stream(model->tokenizer);
    if (callback != nullptr)
      g.on_token = [&](int64_t, int64_t token) {
        const std::string piece = stream.push(static_cast<int32_t>(token));
        return callback(token, piece.c_str(), user_data) != 0;
      };
    const auto result = models::generate(*model->pretrained.model, {std::vector<int64_t>(prompt, prompt + prompt_length)}, g);
    const auto& tokens = result.tokens[0];
    *count = tokens.size();
    std::copy_n(tokens.begin(), std::min(capacity, tokens.size()), out_ids);
  });
}

weft_status weft_forward(weft_model* model, const int64_t* ids, size_t count, weft_tensor** logits) {
  if (model == nullptr || ids == nullptr || count == 0 || logits == nullptr)
    return invalid("weft_forward: model, ids (count >= 1) and logits must not be NULL");
  *logits = nullptr;
  return guarded([&] {
    NoGradGuard no_grad;
    const Tensor input = from_vector(std::vector<int64_t>(ids, ids + count), {1, static_cast<int64_t>(count)}, DType::Int64);
    *logits = new weft_tensor{model->pretrained.model->forward(input).to(kFloat32)};
  });
}

}  // extern "C"
