// Opening etspec .pte files: header check, ExecuTorch load with shared memory arenas (the
// target's methods share one KV cache), and the etspec metadata, validated field by field
// from the contract generated out of etspec/contract.py (no hand-kept copy of it here).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include "etspec_contract.h"

namespace etspec {

// Anything a user can cause or fix (a bad file, a mismatched pair, a bad argument): the
// runner prints what() as one line and exits non-zero.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// contract::kMessages[key] with its {field} placeholders filled in.
std::string message(const std::string& key, const std::map<std::string, std::string>& fields);

#define ETSPEC_CPP_INT int64_t
#define ETSPEC_CPP_STR std::string
#define ETSPEC_CPP_FLOAT double
#define ETSPEC_CPP_INTS std::vector<int64_t>
#define ETSPEC_DECLARE(name, kind) ETSPEC_CPP_##kind name{};

struct TargetMetadata {
  ETSPEC_TARGET_FIELDS(ETSPEC_DECLARE)
  std::string verify_method(int64_t width) const;
  int64_t verify_width_for(int64_t rows) const;
  std::string hidden_spec() const;
};

struct DraftMetadata {
  ETSPEC_DRAFT_FIELDS(ETSPEC_DECLARE)
  std::string extend_method(int64_t width) const;
  int64_t extend_width_for(int64_t rows) const;
  std::string hidden_spec() const;
};

// A method's outputs, copied out of the planned memory (with shared arenas the next call of
// any method may overwrite it).
struct Tensor {
  std::vector<int64_t> sizes;
  std::vector<float> data;
  const float* row(int64_t i) const { return data.data() + i * sizes.back(); }
  int64_t cols() const { return sizes.back(); }
};

class Program {
 public:
  // Loads path and checks that it is an etspec artifact of kind `expect` ("target"/"draft").
  // weight_cache: XNNPACK packs each weight once for all methods (else once per method).
  Program(const std::string& path, const std::string& expect, bool weight_cache = true);
  std::vector<Tensor> run(const std::string& method,
                          const std::vector<executorch::runtime::EValue>& inputs);
  std::vector<executorch::runtime::EValue> constant(const std::string& name);
  bool has_method(const std::string& name) const;
  const std::string& path() const { return path_; }

  TargetMetadata target;  // filled for a target
  DraftMetadata draft;    // filled for a draft
  int64_t weights_bytes = 0;

 private:
  std::string path_;
  std::unique_ptr<executorch::extension::module::Module> module_;
  std::vector<std::string> methods_;
};

// The pair checks of etspec/contract.py::check_pair.
void check_pair(const TargetMetadata& target, const DraftMetadata& draft);

// Attention masks as the methods take them (runtime/masks.py): a mask's width is the one
// dynamic dimension of every attending method; its first `committed(width)` columns are
// committed slots [0, n) and its last `scratch()` columns the scratch slots. A target with
// sliding layers (`window` > 0) also takes their band after the mask.
struct MaskLayout {
  int64_t max_context = 0, cache_size = 0, window = 0;
  int64_t scratch() const { return cache_size - max_context; }
  // contract.mask_width: columns of a mask that shows committed slots [0, needed).
  int64_t width(int64_t needed) const;
  int64_t committed(int64_t width) const { return width - scratch(); }
  int64_t column(int64_t slot, int64_t width) const {
    return slot < max_context ? slot : slot - max_context + committed(width);
  }
  // Causal rows at `positions` (slot == position), as narrow as they allow; sets `width`.
  std::vector<float> causal(const std::vector<int64_t>& positions, int64_t& width) const;
  // The sliding layers' band after a `width`-column mask for rows whose lowest position is
  // `lowest` (contract.band_start: committed slots [start, n), then the scratch slots);
  // empty without sliding layers (no band input).
  std::vector<int64_t> band(int64_t lowest, int64_t width) const;
};

// start, start + 1, ..., start + n - 1 (positions and slots of consecutive rows).
std::vector<int64_t> iota(int64_t start, int64_t n);

// 1-D int64 / float tensors over caller-owned storage (no copy).
executorch::extension::TensorPtr longs(std::vector<int64_t>& v);
executorch::extension::TensorPtr floats(std::vector<float>& v, int64_t rows, int64_t cols);

}  // namespace etspec
