/* weft_c.h: weft's C API (C11), for programs that are not C++: load a Hugging Face model folder,
 * tokenize, generate with a per-token callback, run a forward to logits, and pass tensors in and
 * out.
 *
 * Stable ABI: every object is an opaque handle created and freed by the library; every call
 * returns a weft_status (WEFT_OK or why not) and, on failure, leaves a message that
 * weft_last_error() returns (per thread, valid until that thread's next failing call). No C++
 * exception crosses this boundary, no C++ type appears in it, and the structs passed in carry
 * their own size (struct_size) so fields can be added at the end without breaking old callers.
 * Strings are UTF-8 and NUL-terminated. Link with -lweft_c -lweft (or the weft pkg-config file).
 */
#ifndef WEFT_C_H
#define WEFT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_status {
  WEFT_OK = 0,
  WEFT_INVALID_ARGUMENT = 1, /* a null handle or pointer, a bad option, a buffer too small */
  WEFT_ERROR = 2,            /* the operation failed: weft_last_error() says why */
  WEFT_OUT_OF_MEMORY = 3
} weft_status;

/* The message of this thread's last failed call ("" if none). */
const char* weft_last_error(void);
/* "0.1.0" */
const char* weft_version(void);
/* The CPU kernel level weft chose at run time: "scalar", "avx2", "avx512", ... */
const char* weft_cpu_kernel(void);
/* Threads weft's CPU kernels use (>= 1). */
weft_status weft_set_num_threads(int threads);

/* ---- tensors ---- */
typedef enum weft_dtype {
  WEFT_FLOAT32 = 0,
  WEFT_FLOAT64 = 1,
  WEFT_BFLOAT16 = 2,
  WEFT_FLOAT16 = 3,
  WEFT_INT64 = 4,
  WEFT_INT32 = 5,
  WEFT_INT8 = 6,
  WEFT_UINT8 = 7,
  WEFT_BOOL = 8,
  /* Not dtypes: they make every int a value of weft_dtype (its size fixed for the ABI, and an
   * out-of-range value from a caller something the library can check and refuse). */
  WEFT_DTYPE_RANGE_MIN_ = -2147483647 - 1,
  WEFT_DTYPE_RANGE_MAX_ = 2147483647
} weft_dtype;

typedef struct weft_tensor weft_tensor;

/* A new tensor holding a copy of `data` (shape[0] * ... * shape[ndim-1] elements of dtype, row-major). */
weft_status weft_tensor_create(const void* data, const int64_t* shape, int ndim, weft_dtype dtype, weft_tensor** out);
void weft_tensor_free(weft_tensor* tensor);
int weft_tensor_ndim(const weft_tensor* tensor);                 /* -1 for a null handle */
int64_t weft_tensor_size(const weft_tensor* tensor, int dim);    /* -1 when dim is out of range */
weft_dtype weft_tensor_dtype(const weft_tensor* tensor);
int64_t weft_tensor_numel(const weft_tensor* tensor);
/* Copies the elements, row-major, converted to `dtype`, into `data` of `capacity` bytes. */
weft_status weft_tensor_copy_out(const weft_tensor* tensor, weft_dtype dtype, void* data, size_t capacity);

/* ---- models ---- */
typedef struct weft_model weft_model;

typedef struct weft_load_options {
  size_t struct_size;    /* sizeof(weft_load_options) */
  const char* quantize;  /* NULL or "": as stored; "nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "fp8", "fp8-channel" */
  int bfloat16;          /* nonzero: bfloat16 weights and compute */
} weft_load_options;

/* Loads `dir` (config.json, model.safetensors or an index, tokenizer.json). options may be NULL.
   A folder that transformers saved through bitsandbytes (4-bit or LLM.int8()) loads as stored;
   options->quantize must then be NULL or "". */
weft_status weft_model_load(const char* dir, const weft_load_options* options, weft_model** out);
void weft_model_free(weft_model* model);
int64_t weft_model_vocab_size(const weft_model* model);
int64_t weft_model_max_positions(const weft_model* model);

/* Token ids of `text`, with the tokenizer's special tokens when add_special_tokens. Writes at most
 * `capacity` ids and sets *count to how many there are (call with capacity 0 to ask). */
weft_status weft_tokenize(const weft_model* model, const char* text, int add_special_tokens, int64_t* ids,
                          size_t capacity, size_t* count);
/* The text of `ids` (special tokens skipped when skip_special_tokens), NUL-terminated, into `text`
 * of `capacity` bytes; *length is its length without the NUL (call with capacity 0 to ask). */
weft_status weft_detokenize(const weft_model* model, const int64_t* ids, size_t count, int skip_special_tokens,
                            char* text, size_t capacity, size_t* length);

/* Called for every new token; `piece` is the text it completes (may be "" while a multi-byte
 * character is incomplete). Return nonzero to go on, zero to stop. */
typedef int (*weft_token_callback)(int64_t token, const char* piece, void* user_data);

typedef struct weft_generate_options {
  size_t struct_size;      /* sizeof(weft_generate_options) */
  int64_t max_new_tokens;  /* >= 1 */
  int greedy;              /* nonzero: argmax; else sample with the three below */
  double temperature;      /* > 0 */
  int64_t top_k;           /* 0: off, else 1..vocabulary */
  double top_p;            /* (0, 1] */
  uint64_t seed;
  int kv_cache_bfloat16;   /* nonzero: a bfloat16 KV cache */
} weft_generate_options;

/* Fills `options` with the defaults: 64 new tokens, greedy, temperature 1, top-k off, top-p 1. */
void weft_generate_options_init(weft_generate_options* options);

/* Continues `prompt` (token ids). Writes at most `capacity` new ids into `out_ids` (may be NULL
 * with capacity 0) and sets *count to how many were generated. callback may be NULL. */
weft_status weft_generate(weft_model* model, const int64_t* prompt, size_t prompt_length,
                          const weft_generate_options* options, weft_token_callback callback, void* user_data,
                          int64_t* out_ids, size_t capacity, size_t* count);

/* Logits (1, T, V) float32 of the T tokens `ids`; free the tensor with weft_tensor_free. */
weft_status weft_forward(weft_model* model, const int64_t* ids, size_t count, weft_tensor** logits);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_C_H */
