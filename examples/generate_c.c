/* generate_c: weft's C API from a C program — load a Hugging Face model folder, tokenize a
 * prompt, stream a greedy continuation to stdout, and check a forward's logits shape.
 *
 *   generate_c MODEL_DIR PROMPT [MAX_NEW_TOKENS]
 *
 * Exit status 0 on success, 2 for a bad command line, 1 with weft's message on stderr otherwise. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft_c.h"

/* The prompt goes out with the first new token, so that a request weft_generate refuses prints
 * nothing but the error. */
struct echo {
  const char* prompt;
  int printed;
};

static int print_piece(int64_t token, const char* piece, void* user_data) {
  struct echo* echo = user_data;
  (void)token;
  if (!echo->printed) fputs(echo->prompt, stdout);
  echo->printed = 1;
  fputs(piece, stdout);
  fflush(stdout);
  return 1;
}

static int fail(const char* what) {
  fprintf(stderr, "generate_c: %s: %s\n", what, weft_last_error());
  return 1;
}

static int out_of_memory(void) {
  fprintf(stderr, "generate_c: out of memory\n");
  return 1;
}

/* MAX_NEW_TOKENS: the whole argument a decimal integer of at least 1 (atoll would read "abc" as 0
 * and "-3" as a size that no buffer holds). */
static int parse_count(const char* text, long long* value) {
  char* end = NULL;
  errno = 0;
  *value = strtoll(text, &end, 10);
  return end != text && *end == '\0' && errno == 0 && *value >= 1;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: generate_c MODEL_DIR PROMPT [MAX_NEW_TOKENS]\n");
    return 2;
  }
  long long max_new_tokens = 16;
  if (argc > 3 && !parse_count(argv[3], &max_new_tokens)) {
    fprintf(stderr, "generate_c: MAX_NEW_TOKENS expects a whole number of at least 1, got '%s'\n", argv[3]);
    return 2;
  }
  weft_model* model = NULL;
  if (weft_model_load(argv[1], NULL, &model) != WEFT_OK) return fail("loading the model");

  size_t count = 0;
  if (weft_tokenize(model, argv[2], 1, NULL, 0, &count) != WEFT_OK) return fail("tokenizing");
  int64_t* prompt = malloc((count > 0 ? count : 1) * sizeof(int64_t));
  if (prompt == NULL) return out_of_memory();
  if (weft_tokenize(model, argv[2], 1, prompt, count, &count) != WEFT_OK) return fail("tokenizing");

  weft_generate_options options;
  weft_generate_options_init(&options);
  options.max_new_tokens = max_new_tokens;
  /* No more new tokens than the model has positions: a larger count is refused by weft_generate
   * below, and the buffer is only ever as large as what can be generated. */
  const int64_t positions = weft_model_max_positions(model);
  const size_t capacity = (size_t)(max_new_tokens < positions ? max_new_tokens : positions);
  int64_t* out = malloc(capacity * sizeof(int64_t));
  if (out == NULL) return out_of_memory();
  size_t generated = 0;
  struct echo echo = {argv[2], 0};
  if (weft_generate(model, prompt, count, &options, print_piece, &echo, out, capacity, &generated) != WEFT_OK)
    return fail("generating");
  printf("\n");

  weft_tensor* logits = NULL;
  if (weft_forward(model, prompt, count, &logits) != WEFT_OK) return fail("running the forward");
  printf("tokens: %zu prompt, %zu generated; logits (%lld, %lld, %lld); kernel %s\n", count, generated,
         (long long)weft_tensor_size(logits, 0), (long long)weft_tensor_size(logits, 1),
         (long long)weft_tensor_size(logits, 2), weft_cpu_kernel());
  weft_tensor_free(logits);
  free(out);
  free(prompt);
  weft_model_free(model);
  return 0;
}
