// grammar.cpp — the constraint engine for structured output: llguidance
// (native/llg, linked in statically), behind the shim's own small ABI.
//
// A grammar tokenizer is built once per model from its tokenizer.json; a
// matcher is one request's constraint state (JSON schema, regex, Lark or
// llguidance grammar). Each step the caller asks for the mask of tokens the
// grammar allows, samples, and feeds the token back. None of this touches
// MLX, so every call works on any thread (a matcher on one thread at a time).
#include <cstring>

#include "internal.h"
#include "llguidance.h"

struct mlxgo_grammar_tokenizer_ {
  LlgTokenizer* t;
};
struct mlxgo_matcher_ {
  LlgMatcher* m;
};

namespace {

LlgConstraintInit constraint_init(const mlxgo_grammar_tokenizer_* tok) {
  LlgConstraintInit init;
  std::memset(&init, 0, sizeof init);
  llg_constraint_init_set_defaults(&init, tok->t);
  // Messages come back through the error string, never on our stderr.
  init.log_stderr_level = 0;
  return init;
}

// kinds are the constraint types llguidance reads; anything else is an
// argument error here rather than llguidance's message.
const char* kind(const char* k) {
  if (k == nullptr) throw shim::ArgError("null grammar kind");
  for (const char* ok : {"json_schema", "regex", "lark", "llguidance"}) {
    if (std::strcmp(k, ok) == 0) return ok;
  }
  throw shim::ArgError(std::string("unknown grammar kind ") + k + " (json_schema, regex, lark, llguidance)");
}

mlxgo_matcher_* matcher(mlxgo_matcher m) {
  if (m == nullptr || m->m == nullptr) throw shim::ArgError("null matcher");
  return m;
}

// check turns a matcher's error state into an exception with its message.
void check(mlxgo_matcher_* m) {
  if (llg_matcher_is_error(m->m)) {
    const char* e = llg_matcher_get_error(m->m);
    throw std::runtime_error(e ? e : "grammar matcher error");
  }
}

}  // namespace

extern "C" {

const char* mlxgo_grammar_version(void) { return llg_get_version(); }

int mlxgo_grammar_tokenizer_new(const char* tokenizer_json, int vocab_size, const int* eos, int n_eos,
                                mlxgo_grammar_tokenizer* out) {
  MLXGO_ANY_THREAD_BEGIN
  if (tokenizer_json == nullptr || out == nullptr) throw shim::ArgError("null tokenizer.json or out pointer");
  if (n_eos < 1 || eos == nullptr) throw shim::ArgError("a grammar tokenizer needs at least one end token");
  if (vocab_size < 0) throw shim::ArgError("negative vocabulary size");
  std::vector<LlgToken> ends(eos, eos + n_eos);
  LlgTokenizerInitV2 init;
  std::memset(&init, 0, sizeof init);
  init.struct_size = sizeof init;
  // The model's vocabulary (its embedding rows) may be larger than the
  // tokenizer's: the extra ids are never allowed.
  init.vocab_size = static_cast<uint32_t>(vocab_size);
  init.tok_eos = ends[0];
  init.tokenizer_json = tokenizer_json;
  // Grammar-forced text is tokenized greedily over the vocabulary; the mask
  // itself is exact either way (it tests every token against the grammar).
  init.use_approximate_greedy_tokenize_fn = true;
  init.tok_eos_extra = ends.size() > 1 ? ends.data() + 1 : nullptr;
  init.tok_eos_extra_count = ends.size() - 1;
  char err[1024] = {0};
  LlgTokenizer* t = llg_new_tokenizer_v2(&init, err, sizeof err);
  if (t == nullptr) throw std::runtime_error(std::string("cannot build the grammar tokenizer: ") + err);
  *out = new mlxgo_grammar_tokenizer_{t};
  MLXGO_END
}

int mlxgo_grammar_tokenizer_from_vocab(const uint32_t* lens, const uint8_t* bytes, int vocab_size, const int* eos,
                                       int n_eos, mlxgo_grammar_tokenizer* out) {
  MLXGO_ANY_THREAD_BEGIN
  if (lens == nullptr || out == nullptr) throw shim::ArgError("null token lengths or out pointer");
  if (vocab_size < 1) throw shim::ArgError("empty vocabulary");
  if (n_eos < 1 || eos == nullptr) throw shim::ArgError("a grammar tokenizer needs at least one end token");
  size_t total = 0;
  for (int i = 0; i < vocab_size; i++) total += lens[i];
  if (total > 0 && bytes == nullptr) throw shim::ArgError("null token bytes");
  std::vector<LlgToken> ends(eos, eos + n_eos);
  LlgTokenizerInitV2 init;
  std::memset(&init, 0, sizeof init);
  init.struct_size = sizeof init;
  init.vocab_size = static_cast<uint32_t>(vocab_size);
  init.tok_eos = ends[0];
  init.token_lens = lens;
  init.token_bytes = bytes;
  init.use_approximate_greedy_tokenize_fn = true;
  init.tok_eos_extra = ends.size() > 1 ? ends.data() + 1 : nullptr;
  init.tok_eos_extra_count = ends.size() - 1;
  char err[1024] = {0};
  LlgTokenizer* t = llg_new_tokenizer_v2(&init, err, sizeof err);
  if (t == nullptr) throw std::runtime_error(std::string("cannot build the grammar tokenizer: ") + err);
  *out = new mlxgo_grammar_tokenizer_{t};
  MLXGO_END
}

int mlxgo_grammar_tokenizer_free(mlxgo_grammar_tokenizer t) {
  if (t != nullptr) {
    llg_free_tokenizer(t->t);
    delete t;
  }
  return MLXGO_OK;
}

int mlxgo_grammar_validate(mlxgo_grammar_tokenizer t, const char* k, const char* grammar, int* warning) {
  MLXGO_ANY_THREAD_BEGIN
  if (t == nullptr || grammar == nullptr) throw shim::ArgError("null tokenizer or grammar");
  auto init = constraint_init(t);
  char msg[4096] = {0};
  int rc = llg_validate_grammar(&init, kind(k), grammar, msg, sizeof msg);
  if (rc < 0) throw shim::ArgError(msg);
  if (warning != nullptr) *warning = rc;
  if (rc > 0) shim::fail(MLXGO_OK, msg);  // the warning, for mlxgo_last_error
  MLXGO_END
}

int mlxgo_matcher_new(mlxgo_grammar_tokenizer t, const char* k, const char* grammar, mlxgo_matcher* out) {
  MLXGO_ANY_THREAD_BEGIN
  if (t == nullptr || grammar == nullptr || out == nullptr) throw shim::ArgError("null tokenizer, grammar or out");
  auto init = constraint_init(t);
  auto* m = new mlxgo_matcher_{llg_new_matcher(&init, kind(k), grammar)};
  try {
    check(m);
  } catch (...) {
    llg_free_matcher(m->m);
    delete m;
    throw;
  }
  *out = m;
  MLXGO_END
}

int mlxgo_matcher_free(mlxgo_matcher m) {
  if (m != nullptr) {
    llg_free_matcher(m->m);
    delete m;
  }
  return MLXGO_OK;
}

int mlxgo_matcher_clone(mlxgo_matcher m, mlxgo_matcher* out) {
  MLXGO_ANY_THREAD_BEGIN
  if (out == nullptr) throw shim::ArgError("null out pointer");
  *out = new mlxgo_matcher_{llg_clone_matcher(matcher(m)->m)};
  MLXGO_END
}

int mlxgo_matcher_mask_words(mlxgo_matcher m, size_t* words) {
  MLXGO_ANY_THREAD_BEGIN
  if (words == nullptr) throw shim::ArgError("null out pointer");
  *words = llg_matcher_get_mask_byte_size(matcher(m)->m) / 4;
  MLXGO_END
}

int mlxgo_matcher_mask(mlxgo_matcher m, uint32_t* dst, size_t words) {
  MLXGO_ANY_THREAD_BEGIN
  auto* mm = matcher(m);
  if (dst == nullptr) throw shim::ArgError("null mask buffer");
  if (llg_matcher_compute_mask_into(mm->m, dst, words * 4) != 0) check(mm);
  check(mm);
  MLXGO_END
}

int mlxgo_matcher_consume(mlxgo_matcher m, int token) {
  MLXGO_ANY_THREAD_BEGIN
  auto* mm = matcher(m);
  if (token < 0) throw shim::ArgError("negative token id");
  if (llg_matcher_consume_token(mm->m, static_cast<uint32_t>(token)) != 0) check(mm);
  check(mm);
  MLXGO_END
}

int mlxgo_matcher_rollback(mlxgo_matcher m, int n) {
  MLXGO_ANY_THREAD_BEGIN
  auto* mm = matcher(m);
  if (n < 0) throw shim::ArgError("negative rollback");
  if (llg_matcher_rollback(mm->m, static_cast<size_t>(n)) != 0) check(mm);
  check(mm);
  MLXGO_END
}

int mlxgo_matcher_state(mlxgo_matcher m, int* accepting, int* stopped) {
  MLXGO_ANY_THREAD_BEGIN
  auto* mm = matcher(m);
  if (accepting == nullptr || stopped == nullptr) throw shim::ArgError("null out pointer");
  *accepting = llg_matcher_is_accepting(mm->m) ? 1 : 0;
  *stopped = llg_matcher_is_stopped(mm->m) ? 1 : 0;
  check(mm);
  MLXGO_END
}

}  // extern "C"
