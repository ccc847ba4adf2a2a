// The C++ side of etspec/contract.py and etspec/artifact.py: errors and messages, the
// metadata of a target and a draft (fields generated from the contract, no hand-kept copy),
// the pair checks, and the file checks run before ExecuTorch parses anything.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>

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
  // Whether the recipe quantizes activations per row (contract.ROW_QUANTIZED_DTYPES).
  bool row_quantized() const;
};

struct DraftMetadata {
  ETSPEC_DRAFT_FIELDS(ETSPEC_DECLARE)
  std::string extend_method(int64_t width) const;
  int64_t extend_width_for(int64_t rows) const;
  std::string hidden_spec() const;
};

// The pair checks of etspec/contract.py::check_pair.
void check_pair(const TargetMetadata& target, const DraftMetadata& draft);

// etspec/artifact.py's check_artifact: header, declared sizes, integrity trailer, SHA-256.
void check_artifact(const std::string& path);

// A constant method's values by name; nullopt when the program has no such method.
using ConstantReader =
    std::function<std::optional<std::vector<executorch::runtime::EValue>>(const std::string&)>;

// The artifact kind (`expect`: contract::kTargetKind or kDraftKind) and format version.
void check_kind_and_version(const ConstantReader& get, const std::string& path,
                            const std::string& expect);
// Every metadata field, refusing a missing one or one of the wrong type.
TargetMetadata read_target_metadata(const ConstantReader& get);
DraftMetadata read_draft_metadata(const ConstantReader& get);

}  // namespace etspec
