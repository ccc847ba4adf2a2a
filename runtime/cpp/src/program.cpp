#include "program.h"

#include "logs.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sys/stat.h>

using executorch::aten::ScalarType;
using executorch::extension::TensorPtr;
using executorch::extension::module::Module;
using executorch::runtime::EValue;

namespace etspec {
namespace {

// OpenVINO's inference precision (etspec/openvino.py): the backend imports each delegate
// with no properties, so OpenVINO's CPU plugin computes in bf16 wherever the CPU has it.
// Capping oneDNN's ISA below bf16 before the first OpenVINO method loads keeps fp32 (the
// default), unless the environment asks for bf16 or the cap is set already.
void prepare_openvino(const std::string& backend) {
  if (backend != contract::kOpenvino) return;
  const char* env = std::getenv(contract::kOpenvinoPrecisionEnv);
  std::string precision = env ? env : contract::kOpenvinoPrecisions[0];
  std::transform(precision.begin(), precision.end(), precision.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const auto* end = std::end(contract::kOpenvinoPrecisions);
  if (std::find(std::begin(contract::kOpenvinoPrecisions), end, precision) == end) {
    throw Error(message("unknown_choice", {{"what", contract::kOpenvinoPrecisionEnv},
                                           {"value", precision},
                                           {"choices", "fp32, bf16"}}));
  }
  if (precision == contract::kOpenvinoPrecisions[0]) {
    setenv(contract::kOnednnIsaEnv, contract::kOpenvinoFp32Isa, /*overwrite=*/0);
  }
#ifdef ETSPEC_OPENVINO_C
  // Where the build found OpenVINO's C library (CMakeLists.txt), unless the user says.
  if (*ETSPEC_OPENVINO_C) setenv("OPENVINO_LIB_PATH", ETSPEC_OPENVINO_C, /*overwrite=*/0);
#endif
}

}  // namespace

Program::Program(const std::string& path, const std::string& kind, bool weight_cache)
    : path_(path) {
  install_log_handler();
  check_artifact(path);
  // Shared arenas: every method of the target reads and writes the same KV cache buffers.
  // Mapped, not read: weights that run outside the delegate (the embedding table) stay in
  // the file until a lookup touches their page, and the bytes XNNPACK packs from are
  // unmapped once packed. Measured on Gemma 3 270M (8da8w-e4): 453 -> 355 MB resident,
  // 611 -> 493 MB at the peak of loading, as llama.cpp maps its GGUF. etspec replaces a
  // .pte by rename, so a running runner keeps reading the file it mapped.
  module_ = std::make_unique<Module>(path, Module::LoadMode::Mmap, nullptr, nullptr, nullptr,
                                     /*share_memory_arenas=*/true);
  // XNNPACK's weight cache (off by default in ExecuTorch): without it every method keeps
  // its own packed copy of the weights. The Module deep-copies the options.
  executorch::runtime::BackendOptions<1> xnnpack;
  xnnpack.set_option(contract::kXnnpackWeightCache, weight_cache);
  executorch::runtime::LoadBackendOptionsMap options;
  options.set_options(contract::kXnnpackBackend, xnnpack.view());
  const auto err = module_->load(options);
  if (err != executorch::runtime::Error::Ok) {
    throw Error(message("cannot_load", {{"path", path},
                                        {"error", "error " + std::to_string(int(err))}}));
  }
  auto names = module_->method_names();
  if (!names.ok()) {
    throw Error(message("cannot_load", {{"path", path}, {"error", "no method table"}}));
  }
  methods_.assign(names->begin(), names->end());
  check_kind_and_version(reader(), path, kind);
  struct stat st {};
  stat(path.c_str(), &st);
  weights_bytes_ = st.st_size;
}

ConstantReader Program::reader() {
  return [this](const std::string& name) -> std::optional<std::vector<EValue>> {
    if (!has_method(name)) return std::nullopt;
    return constant(name);
  };
}

void Program::load_methods() {
  // A runner pays the load once at start-up, not inside the first request that happens
  // to call a method.
  for (const auto& name : methods_) {
    const auto loaded = module_->load_method(name);
    if (loaded != executorch::runtime::Error::Ok) {
      throw Error(message("cannot_load", {{"path", path_},
                                          {"error", "method " + name + ": error " +
                                                        std::to_string(int(loaded))}}));
    }
  }
}

std::optional<int64_t> Program::output_width(const std::string& method, size_t index) {
  if (!has_method(method)) return std::nullopt;
  const auto meta = module_->method_meta(method);
  if (!meta.ok()) return std::nullopt;
  const auto info = meta->output_tensor_meta(index);
  if (!info.ok() || info->sizes().empty()) return std::nullopt;
  return info->sizes()[info->sizes().size() - 1];
}

TargetProgram::TargetProgram(const std::string& path, bool weight_cache)
    : Program(path, contract::kTargetKind, weight_cache), meta(read_target_metadata(reader())) {
  // The decode's logits are vocab_size wide (artifact.py _check_logits), read from the
  // method's declared output before anything runs.
  const auto width = output_width(contract::kTARGET_DECODE, 0);
  if (!width) throw Error(message("missing_metadata", {{"name", contract::kTARGET_DECODE}}));
  if (*width != meta.vocab_size) {
    throw Error(message("metadata_logits", {{"name", "vocab_size"},
                                            {"value", std::to_string(meta.vocab_size)},
                                            {"method", contract::kTARGET_DECODE},
                                            {"width", std::to_string(*width)}}));
  }
  prepare_openvino(meta.backend);
  load_methods();
}

DraftProgram::DraftProgram(const std::string& path, bool weight_cache)
    : Program(path, contract::kDraftKind, weight_cache), meta(read_draft_metadata(reader())) {
  prepare_openvino(meta.backend);
  load_methods();
}

std::optional<std::string> TargetProgram::tokenizer_json() {
  return stored_text(contract::kTOKENIZER_JSON);
}

std::optional<std::string> TargetProgram::chat_template() {
  return stored_text(contract::kCHAT_TEMPLATE);
}

std::optional<std::string> TargetProgram::stored_text(const char* name) {
  if (!has_method(name)) return std::nullopt;
  const auto values = constant(name);
  if (values.empty() || !values[0].isTensor()) return std::nullopt;
  const auto& t = values[0].toTensor();
  const auto* p = static_cast<const char*>(t.const_data_ptr());
  return std::string(p, p + t.nbytes());
}

bool Program::has_method(const std::string& name) const {
  return std::find(methods_.begin(), methods_.end(), name) != methods_.end();
}

std::vector<EValue> Program::constant(const std::string& name) {
  auto out = module_->execute(name);
  if (!out.ok()) throw Error(path_ + ": metadata method " + name + " failed");
  return *out;
}

std::vector<Tensor> Program::run(const std::string& method, const std::vector<EValue>& inputs) {
  if (!has_method(method)) throw Error(path_ + " has no method '" + method + "'");
  auto out = module_->execute(method, inputs);
  if (!out.ok()) {
    throw Error(path_ + ": method " + method + " failed (ExecuTorch error " +
                std::to_string(int(out.error())) + ")");
  }
  std::vector<Tensor> result;
  for (const auto& v : *out) {
    if (!v.isTensor()) continue;
    const auto& t = v.toTensor();
    Tensor copy;
    copy.sizes.assign(t.sizes().begin(), t.sizes().end());
    if (t.scalar_type() == ScalarType::Float) {
      const float* p = t.const_data_ptr<float>();
      copy.data.assign(p, p + t.numel());
    } else if (t.scalar_type() == ScalarType::Long) {
      const int64_t* p = t.const_data_ptr<int64_t>();
      copy.data.assign(p, p + t.numel());
    }
    result.push_back(std::move(copy));
  }
  return result;
}


TensorPtr longs(std::vector<int64_t>& v) {
  return executorch::extension::from_blob(v.data(), {static_cast<int>(v.size())},
                                          ScalarType::Long);
}

TensorPtr floats(std::vector<float>& v, int64_t rows, int64_t cols) {
  return executorch::extension::from_blob(
      v.data(), {static_cast<int>(rows), static_cast<int>(cols)}, ScalarType::Float);
}


}  // namespace etspec
