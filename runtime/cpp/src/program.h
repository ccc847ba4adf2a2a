// A loaded etspec .pte (runtime/program.py's PteProgram): the file checks, ExecuTorch load
// with shared memory arenas (the target's methods share one KV cache), every method loaded
// at start-up. TargetProgram and DraftProgram are the two kinds, each with its metadata.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include "artifact.h"

namespace etspec {

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
  virtual ~Program() = default;
  std::vector<Tensor> run(const std::string& method,
                          const std::vector<executorch::runtime::EValue>& inputs);
  std::vector<executorch::runtime::EValue> constant(const std::string& name);
  bool has_method(const std::string& name) const;
  // The last dimension of `method`'s output `index` as the program declares it (nothing
  // runs); nullopt without such a method or output.
  std::optional<int64_t> output_width(const std::string& method, size_t index);
  const std::string& path() const { return path_; }
  // The artifact's size: its weights, one copy, as stored.
  int64_t weights_bytes() const { return weights_bytes_; }

 protected:
  // Loads `path`, an etspec artifact of kind `kind` (contract::kTargetKind/kDraftKind).
  // weight_cache: XNNPACK packs each weight once for all methods (else once per method).
  Program(const std::string& path, const std::string& kind, bool weight_cache);
  ConstantReader reader();
  // Loads (and lets XNNPACK pack the weights of) every method.
  void load_methods();

 private:
  std::string path_;
  std::unique_ptr<executorch::extension::module::Module> module_;
  std::vector<std::string> methods_;
  int64_t weights_bytes_ = 0;
};

class TargetProgram : public Program {
 public:
  explicit TargetProgram(const std::string& path, bool weight_cache = true);
  // The HF tokenizer.json export embedded (contract::kTOKENIZER_JSON); nullopt if none.
  std::optional<std::string> tokenizer_json();
  // The checkpoint's chat template as stored (contract CHAT_TEMPLATE JSON), if any.
  std::optional<std::string> chat_template();
  // A constant method's bytes as text (nullopt: the artifact has no such constant).
  std::optional<std::string> stored_text(const char* name);
  const TargetMetadata meta;
};

class DraftProgram : public Program {
 public:
  explicit DraftProgram(const std::string& path, bool weight_cache = true);
  const DraftMetadata meta;
};

// 1-D int64 / float tensors over caller-owned storage (no copy).
executorch::extension::TensorPtr longs(std::vector<int64_t>& v);
executorch::extension::TensorPtr floats(std::vector<float>& v, int64_t rows, int64_t cols);

}  // namespace etspec
