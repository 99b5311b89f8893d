/* The C API from C: every entry point's refusals (null handles, bad options, small buffers) give a
 * status and a message instead of a crash; tensors round-trip with conversion; a model folder
 * that transformers wrote tokenizes, generates and runs a forward as the goldens of
 * scripts/golden_generate.py say. Compiled by a C compiler only (C11).
 *
 *   test_c_api DATA_DIR      (tests/models/data) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_c.h"

static int passed = 0, failed = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (cond) {                                                        \
      ++passed;                                                        \
    } else {                                                           \
      ++failed;                                                        \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
    }                                                                  \
  } while (0)

/* The integers of the JSON array after `key` inside the object of `model` in the goldens file. */
static size_t golden_ids(const char* json, const char* model, const char* key, int64_t* out, size_t capacity) {
  char quoted[128];
  snprintf(quoted, sizeof quoted, "\"%s\"", model);
  const char* at = strstr(json, quoted);
  if (at == NULL) return 0;
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  at = strstr(at, quoted);
  if (at == NULL || (at = strchr(at, '[')) == NULL) return 0;
  size_t n = 0;
  for (++at; *at != ']' && n < capacity;) {
    char* end = NULL;
    out[n++] = strtoll(at, &end, 10);
    at = end;
    while (*at == ',' || *at == ' ') ++at;
  }
  return n;
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = malloc((size_t)size + 1);
  if (text != NULL && fread(text, 1, (size_t)size, f) == (size_t)size) text[size] = '\0';
  fclose(f);
  return text;
}

static void test_refusals(void) {
  weft_model* model = NULL;
  CHECK(weft_model_load(NULL, NULL, &model) == WEFT_INVALID_ARGUMENT);
  CHECK(strlen(weft_last_error()) > 0);
  CHECK(weft_model_load("/nonexistent/model", NULL, &model) == WEFT_ERROR);
  CHECK(model == NULL);
  CHECK(strstr(weft_last_error(), "/nonexistent/model") != NULL);
  size_t count = 0;
  CHECK(weft_tokenize(NULL, "x", 1, NULL, 0, &count) == WEFT_INVALID_ARGUMENT);
  CHECK(weft_generate(NULL, NULL, 0, NULL, NULL, NULL, NULL, 0, &count) == WEFT_INVALID_ARGUMENT);
  CHECK(weft_set_num_threads(0) == WEFT_INVALID_ARGUMENT);
  CHECK(weft_tensor_ndim(NULL) == -1);
  weft_model_free(NULL);
  weft_tensor_free(NULL);
}

static void test_tensors(void) {
  const float values[6] = {1.0f, -2.5f, 3.0f, 0.5f, 1e3f, -7.0f};
  const int64_t shape[2] = {2, 3};
  weft_tensor* t = NULL;
  CHECK(weft_tensor_create(values, shape, 2, WEFT_FLOAT32, &t) == WEFT_OK);
  CHECK(weft_tensor_ndim(t) == 2 && weft_tensor_size(t, 0) == 2 && weft_tensor_size(t, 1) == 3);
  CHECK(weft_tensor_size(t, 2) == -1 && weft_tensor_numel(t) == 6 && weft_tensor_dtype(t) == WEFT_FLOAT32);
  double wide[6];
  CHECK(weft_tensor_copy_out(t, WEFT_FLOAT64, wide, sizeof wide) == WEFT_OK);
  for (int i = 0; i < 6; ++i) CHECK(wide[i] == (double)values[i]);
  int64_t ints[6];
  CHECK(weft_tensor_copy_out(t, WEFT_INT64, ints, sizeof ints) == WEFT_OK);
  CHECK(ints[1] == -2 && ints[4] == 1000);
  CHECK(weft_tensor_copy_out(t, WEFT_FLOAT64, wide, sizeof wide - 1) == WEFT_INVALID_ARGUMENT);
  CHECK(weft_tensor_copy_out(t, (weft_dtype)42, wide, sizeof wide) == WEFT_INVALID_ARGUMENT);
  weft_tensor_free(t);
  CHECK(weft_tensor_create(values, shape, 2, (weft_dtype)-1, &t) == WEFT_INVALID_ARGUMENT);
}

static int on_token_calls = 0;
static int count_tokens(int64_t token, const char* piece, void* user_data) {
  (void)token;
  (void)piece;
  ++*(int*)user_data;
  return ++on_token_calls < 5; /* stop after five tokens */
}

static void test_model(const char* data_dir) {
  char path[4096], goldens_path[4096];
  snprintf(path, sizeof path, "%s/tiny_llama", data_dir);
  snprintf(goldens_path, sizeof goldens_path, "%s/generate_goldens.json", data_dir);
  char* goldens = read_file(goldens_path);
  CHECK(goldens != NULL);
  if (goldens == NULL) return;
  weft_model* model = NULL;
  weft_load_options load = {sizeof(weft_load_options), NULL, 0};
  CHECK(weft_model_load(path, &load, &model) == WEFT_OK);
  if (model == NULL) {
    fprintf(stderr, "load: %s\n", weft_last_error());
    free(goldens);
    return;
  }
  CHECK(weft_model_vocab_size(model) == 300);
  CHECK(weft_model_max_positions(model) == 64);

  int64_t want_prompt[64], want_completion[64];
  const size_t prompt_n = golden_ids(goldens, "tiny_llama", "text_prompt_ids", want_prompt, 64);
  const size_t completion_n = golden_ids(goldens, "tiny_llama", "text_completion_ids", want_completion, 64);
  CHECK(prompt_n > 0 && completion_n == 20);

  const char* text = "The licenses for most software";
  size_t count = 0;
  CHECK(weft_tokenize(model, text, 1, NULL, 0, &count) == WEFT_OK);
  CHECK(count == prompt_n);
  int64_t ids[64];
  CHECK(weft_tokenize(model, text, 1, ids, 1, &count) == WEFT_ERROR); /* a buffer too small */
  CHECK(weft_tokenize(model, text, 1, ids, 64, &count) == WEFT_OK);
  CHECK(count == prompt_n && memcmp(ids, want_prompt, count * sizeof(int64_t)) == 0);
  char back[256];
  size_t length = 0;
  CHECK(weft_detokenize(model, ids, count, 1, back, sizeof back, &length) == WEFT_OK);
  CHECK(strcmp(back, text) == 0 && length == strlen(text));

  weft_generate_options options;
  weft_generate_options_init(&options);
  options.max_new_tokens = 20;
  int64_t out[20];
  size_t generated = 0;
  CHECK(weft_generate(model, ids, count, &options, NULL, NULL, out, 20, &generated) == WEFT_OK);
  CHECK(generated == 20 && memcmp(out, want_completion, sizeof out) == 0);
  int calls = 0;
  CHECK(weft_generate(model, ids, count, &options, count_tokens, &calls, out, 20, &generated) == WEFT_OK);
  CHECK(calls == 5 && generated == 5);
  options.max_new_tokens = 0;
  CHECK(weft_generate(model, ids, count, &options, NULL, NULL, out, 20, &generated) == WEFT_ERROR);
  options.max_new_tokens = 4;
  options.greedy = 0;
  options.temperature = -1.0;
  CHECK(weft_generate(model, ids, count, &options, NULL, NULL, out, 20, &generated) == WEFT_ERROR);
  CHECK(strstr(weft_last_error(), "temperature") != NULL);

  weft_tensor* logits = NULL;
  CHECK(weft_forward(model, ids, count, &logits) == WEFT_OK);
  CHECK(weft_tensor_ndim(logits) == 3 && weft_tensor_size(logits, 1) == (int64_t)count &&
        weft_tensor_size(logits, 2) == 300);
  weft_tensor_free(logits);
  weft_model_free(model);
  free(goldens);
}

/* A folder that transformers saved through bitsandbytes (NF4, double quantization) loads as
   stored and continues its prompt as the golden says; asking to quantize it again is refused. */
static void test_bnb_model(const char* data_dir) {
  char path[4096], goldens_path[4096];
  snprintf(path, sizeof path, "%s/tiny_llama_nf4_bnb", data_dir);
  snprintf(goldens_path, sizeof goldens_path, "%s/bnb_goldens.json", data_dir);
  char* goldens = read_file(goldens_path);
  CHECK(goldens != NULL);
  if (goldens == NULL) return;
  int64_t prompt[16], want[16], out[16];
  const size_t prompt_n = golden_ids(goldens, "tiny_llama_nf4_bnb", "prompt", prompt, 16);
  const size_t want_n = golden_ids(goldens, "tiny_llama_nf4_bnb", "greedy", want, 16);
  CHECK(prompt_n == 8 && want_n == 12);
  weft_model* model = NULL;
  weft_load_options load = {sizeof(weft_load_options), NULL, 0};
  CHECK(weft_model_load(path, &load, &model) == WEFT_OK);
  if (model != NULL) {
    weft_generate_options options;
    weft_generate_options_init(&options);
    options.max_new_tokens = (int64_t)want_n;
    size_t generated = 0;
    CHECK(weft_generate(model, prompt, prompt_n, &options, NULL, NULL, out, 16, &generated) == WEFT_OK);
    CHECK(generated == want_n && memcmp(out, want, want_n * sizeof(int64_t)) == 0);
    weft_model_free(model);
  }
  weft_load_options requantize = {sizeof(weft_load_options), "int8", 0};
  model = NULL;
  CHECK(weft_model_load(path, &requantize, &model) == WEFT_ERROR && model == NULL);
  CHECK(strstr(weft_last_error(), "the weights are already quantized") != NULL);
  free(goldens);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_c_api DATA_DIR\n");
    return 2;
  }
  test_refusals();
  test_tensors();
  test_model(argv[1]);
  test_bnb_model(argv[1]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
