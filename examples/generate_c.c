/* generate_c: weft's C API from a C program — load a Hugging Face model folder, tokenize a
 * prompt, stream a greedy continuation to stdout, and check a forward's logits shape.
 *
 *   generate_c MODEL_DIR PROMPT [MAX_NEW_TOKENS]
 *
 * Exit status 0 on success, 1 with weft's message on stderr otherwise. */
#include <stdio.h>
#include <stdlib.h>

#include "weft_c.h"

static int print_piece(int64_t token, const char* piece, void* user_data) {
  (void)token;
  (void)user_data;
  fputs(piece, stdout);
  fflush(stdout);
  return 1;
}

static int fail(const char* what) {
  fprintf(stderr, "generate_c: %s: %s\n", what, weft_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: generate_c MODEL_DIR PROMPT [MAX_NEW_TOKENS]\n");
    return 2;
  }
  weft_model* model = NULL;
  if (weft_model_load(argv[1], NULL, &model) != WEFT_OK) return fail("loading the model");

  size_t count = 0;
  if (weft_tokenize(model, argv[2], 1, NULL, 0, &count) != WEFT_OK) return fail("tokenizing");
  int64_t* prompt = malloc(count * sizeof(int64_t));
  if (prompt == NULL || weft_tokenize(model, argv[2], 1, prompt, count, &count) != WEFT_OK) return fail("tokenizing");

  weft_generate_options options;
  weft_generate_options_init(&options);
  options.max_new_tokens = argc > 3 ? atoll(argv[3]) : 16;
  int64_t* out = malloc((size_t)options.max_new_tokens * sizeof(int64_t));
  size_t generated = 0;
  fputs(argv[2], stdout);
  if (out == NULL || weft_generate(model, prompt, count, &options, print_piece, NULL, out,
                                   (size_t)options.max_new_tokens, &generated) != WEFT_OK)
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
