#include "artifact.h"

#include "sha256.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using executorch::runtime::EValue;

namespace etspec {

std::string message(const std::string& key, const std::map<std::string, std::string>& fields) {
  std::string text;
  for (const auto& [k, v] : contract::kMessages) {
    if (key == k) text = v;
  }
  for (const auto& [name, value] : fields) {
    const std::string slot = "{" + name + "}";
    for (size_t at = text.find(slot); at != std::string::npos; at = text.find(slot, at)) {
      text.replace(at, slot.size(), value);
      at += value.size();
    }
  }
  return text;
}

namespace {

// Python's repr of the raw constant-method outputs, for the bad_metadata message.
std::string repr(const std::vector<EValue>& raw) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < raw.size(); ++i) {
    out << (i ? ", " : "");
    if (raw[i].isInt()) out << raw[i].toInt();
    else if (raw[i].isDouble()) out << raw[i].toDouble();
    else if (raw[i].isString()) out << "'" << std::string(raw[i].toString()) << "'";
    else out << "?";
  }
  return out.str() + "]";
}

[[noreturn]] void bad(const char* name, const std::vector<EValue>& raw) {
  throw Error(message("bad_metadata", {{"name", name}, {"value", repr(raw)}}));
}

void read_value(const char* name, const std::vector<EValue>& raw, int64_t& out) {
  if (raw.size() != 1 || !raw[0].isInt()) bad(name, raw);
  out = raw[0].toInt();
}
[[maybe_unused]] void read_value(const char* name, const std::vector<EValue>& raw,
                                 double& out) {
  if (raw.size() != 1 || !(raw[0].isDouble() || raw[0].isInt())) bad(name, raw);
  out = raw[0].isDouble() ? raw[0].toDouble() : static_cast<double>(raw[0].toInt());
}
void read_value(const char* name, const std::vector<EValue>& raw, std::string& out) {
  if (raw.size() != 1 || !raw[0].isString()) bad(name, raw);
  out = std::string(raw[0].toString());
}
void read_value(const char* name, const std::vector<EValue>& raw, std::vector<int64_t>& out) {
  out.clear();
  for (const auto& v : raw) {
    if (!v.isInt()) bad(name, raw);
    out.push_back(v.toInt());
  }
}

int64_t narrowest(const std::vector<int64_t>& widths, int64_t rows, const char* method) {
  for (int64_t w : widths) {
    if (w >= rows) return w;
  }
  throw Error(message("width_exceeded",
                      {{"rows", std::to_string(rows)},
                       {"method", method},
                       {"widest", std::to_string(widths.empty() ? 0 : widths.back())}}));
}

uint64_t le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// Program bytes (flatbuffer plus segments) the ExecuTorch extended header describes: -1
// without one. Mirrors etspec/artifact.py's _declared_size.
int64_t declared_size(const unsigned char* head) {
  if (std::memcmp(head + 8, "eh00", 4) != 0) return -1;
  const uint32_t length = head[12] | head[13] << 8 | head[14] << 16 | uint32_t(head[15]) << 24;
  if (length < 32) return -1;
  const uint64_t program = le64(head + 16), base = le64(head + 24), segments = le64(head + 32);
  return static_cast<int64_t>(segments ? base + segments : program);
}

}  // namespace

// The checks of etspec/artifact.py's check_artifact, in its order and with its messages:
// header, declared sizes, integrity trailer, SHA-256, all before ExecuTorch parses the file.
void check_artifact(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw Error(message("no_file", {{"path", path}}));
  if (!S_ISREG(st.st_mode)) throw Error(path + ": not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot read");
  const int64_t size = st.st_size;
  unsigned char head[64] = {};
  f.read(reinterpret_cast<char*>(head), sizeof(head));
  // An ExecuTorch program is a flatbuffer with the identifier "ET" + 2 digits at bytes 4..8.
  const bool ok = f.gcount() == sizeof(head) && head[4] == 'E' && head[5] == 'T' &&
                  std::isdigit(head[6]) && std::isdigit(head[7]);
  if (!ok) throw Error(message("bad_header", {{"path", path}}));
  const int64_t trailer_size = contract::kTrailerSize;
  const int64_t declared = declared_size(head);
  if (declared >= 0 && size != declared && size < declared + trailer_size) {
    throw Error(message("truncated", {{"path", path},
                                      {"size", std::to_string(size)},
                                      {"expected", std::to_string(declared + trailer_size)}}));
  }
  const std::string version = std::to_string(contract::kFormatVersion);
  if (size < int64_t(sizeof(head)) + trailer_size) {
    throw Error(message("no_trailer", {{"path", path}, {"expected", version}}));
  }
  unsigned char trailer[contract::kTrailerSize];
  f.seekg(size - trailer_size);
  f.read(reinterpret_cast<char*>(trailer), trailer_size);
  if (f.gcount() != trailer_size) throw Error(path + ": cannot read");
  const size_t magic_size = sizeof(contract::kTrailerMagic) - 1;
  if (std::memcmp(trailer + 40, contract::kTrailerMagic, magic_size) != 0) {
    if (declared < 0 || declared == size) {
      throw Error(message("no_trailer", {{"path", path}, {"expected", version}}));
    }
    throw Error(message("damaged", {{"path", path}, {"what", message("damage_trailer", {})}}));
  }
  const uint64_t program_size = le64(trailer + 32);
  if (program_size != uint64_t(size - trailer_size) ||
      (declared >= 0 && uint64_t(declared) != program_size)) {
    throw Error(message("damaged", {{"path", path}, {"what", message("damage_sizes", {})}}));
  }
  Digest digest{};
  f.clear();
  f.seekg(0);
  if (!sha256(f, program_size, digest)) throw Error(path + ": cannot read");
  if (std::memcmp(digest.data(), trailer, 32) != 0) {
    throw Error(message("damaged", {{"path", path},
                                    {"what", message("damage_digest", {})}}));
  }
}


void check_kind_and_version(const ConstantReader& get, const std::string& path,
                            const std::string& expect) {
  const auto kind_raw = get(contract::kArtifactKind);
  if (!kind_raw || kind_raw->size() != 1 || !(*kind_raw)[0].isString()) {
    throw Error(message("not_etspec", {{"path", path}}));
  }
  const std::string kind((*kind_raw)[0].toString());
  if (kind != contract::kTargetKind && kind != contract::kDraftKind) {
    throw Error(message("unknown_kind", {{"path", path}, {"kind", kind}}));
  }
  if (kind != expect) {
    throw Error(message("wrong_kind", {{"path", path}, {"kind", kind}, {"expected", expect}}));
  }
  const auto version_raw = get(contract::kFormatVersionField);
  if (!version_raw) throw Error(message("no_version", {{"path", path}}));
  int64_t version = 0;
  read_value(contract::kFormatVersionField, *version_raw, version);
  if (version != contract::kFormatVersion) {
    throw Error(message("wrong_format_version",
                        {{"path", path},
                         {"version", std::to_string(version)},
                         {"expected", std::to_string(contract::kFormatVersion)}}));
  }
}

#define ETSPEC_READ(name, kind)                                                      \
  {                                                                                  \
    const auto raw = get(#name);                                                     \
    if (!raw) throw Error(message("missing_metadata", {{"name", #name}}));           \
    read_value(#name, *raw, md.name);                                                \
  }

namespace {

using Ints = std::map<std::string, std::vector<int64_t>>;

void put(Ints& out, const char* name, int64_t v) { out[name] = {v}; }
void put(Ints& out, const char* name, const std::vector<int64_t>& v) { out[name] = v; }
void put(Ints&, const char*, const std::string&) {}
[[maybe_unused]] void put(Ints&, const char*, double) {}  // no FLOAT field today

// contract.check_metadata: every integer field within its range, widths ascending to their
// widest. A bound names only a field checked before it (contract.TARGET_RANGES' order), so
// its sum cannot overflow.
template <size_t N>
void check_metadata(const Ints& ints, const contract::MetadataRange (&ranges)[N]) {
  const auto bound = [&](const contract::MetadataBound& b) -> int64_t {
    return b.field == nullptr ? b.value : ints.at(b.field).front() + b.value;
  };
  const auto text = [](int64_t v) { return std::to_string(v); };
  for (const auto& r : ranges) {
    const int64_t least = bound(r.least), most = bound(r.most);
    for (int64_t v : ints.at(r.name)) {
      if (v < least || v > most) {
        throw Error(message("metadata_range", {{"name", r.name},
                                                {"value", std::to_string(v)},
                                                {"least", text(least)},
                                                {"most", text(most)}}));
      }
    }
  }
  for (const auto& [name, widest] : contract::kMetadataWidths) {
    const auto it = ints.find(name);
    if (it == ints.end()) continue;
    const std::vector<int64_t>& w = it->second;
    const int64_t most = ints.at(widest).front();
    bool ascending = !w.empty() && w.back() == most;
    for (size_t i = 1; ascending && i < w.size(); ++i) ascending = w[i - 1] < w[i];
    if (!ascending) {
      std::string listed = "[";
      for (size_t i = 0; i < w.size(); ++i) listed += (i ? ", " : "") + std::to_string(w[i]);
      throw Error(message("metadata_widths", {{"name", name},
                                               {"value", listed + "]"},
                                               {"widest", widest},
                                               {"most", std::to_string(most)}}));
    }
  }
}

#define ETSPEC_PUT(name, kind) put(ints, #name, md.name);

}  // namespace

TargetMetadata read_target_metadata(const ConstantReader& get) {
  TargetMetadata md;
  ETSPEC_TARGET_FIELDS(ETSPEC_READ)
  Ints ints;
  ETSPEC_TARGET_FIELDS(ETSPEC_PUT)
  check_metadata(ints, contract::kTargetRanges);
  return md;
}

DraftMetadata read_draft_metadata(const ConstantReader& get) {
  DraftMetadata md;
  ETSPEC_DRAFT_FIELDS(ETSPEC_READ)
  Ints ints;
  ETSPEC_DRAFT_FIELDS(ETSPEC_PUT)
  check_metadata(ints, contract::kDraftRanges);
  return md;
}
#undef ETSPEC_PUT
#undef ETSPEC_READ

std::string TargetMetadata::verify_method(int64_t width) const {
  return contract::width_method(contract::kTARGET_VERIFY, width, verify_width);
}
int64_t TargetMetadata::verify_width_for(int64_t rows) const {
  return narrowest(verify_widths, rows, contract::kTARGET_VERIFY);
}
std::string TargetMetadata::hidden_spec() const {
  return contract::hidden_spec_text(hidden_state_point, hidden_state_layers);
}

bool TargetMetadata::row_quantized() const {
  for (const char* quantized : contract::kRowQuantizedDtypes) {
    if (dtype == quantized) return true;
  }
  return false;
}
std::string DraftMetadata::extend_method(int64_t width) const {
  return contract::width_method(contract::kDRAFT_EXTEND, width, extend_width);
}
int64_t DraftMetadata::extend_width_for(int64_t rows) const {
  return narrowest(extend_widths, rows, contract::kDRAFT_EXTEND);
}
std::string DraftMetadata::hidden_spec() const {
  return contract::hidden_spec_text(hidden_state_point, hidden_state_layers);
}


void check_pair(const TargetMetadata& target, const DraftMetadata& draft) {
  auto mismatch = [](const char* what, const std::string& expected, const std::string& actual) {
    throw Error(message("pair_mismatch",
                        {{"what", what}, {"expected", expected}, {"actual", actual}}));
  };
#define ETSPEC_PAIR(what, d, t) \
  if (draft.d != target.t) mismatch(what, std::to_string(draft.d), std::to_string(target.t));
  ETSPEC_PAIR_CHECKS(ETSPEC_PAIR)
#undef ETSPEC_PAIR
  if (draft.hidden_spec() != target.hidden_spec()) {
    mismatch(contract::kHiddenSpecCheck, draft.hidden_spec(), target.hidden_spec());
  }
  if (!draft.target_tokenizer_sha256.empty() && !target.tokenizer_sha256.empty() &&
      draft.target_tokenizer_sha256 != target.tokenizer_sha256) {
    throw Error(message("tokenizer_mismatch",
                        {{"expected", draft.target_tokenizer_sha256.substr(0, contract::kDigestShown)},
                         {"actual", target.tokenizer_sha256.substr(0, contract::kDigestShown)}}));
  }
}


}  // namespace etspec
