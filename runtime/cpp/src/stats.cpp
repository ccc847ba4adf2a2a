#include "stats.h"

#include <sstream>

#include "etspec_contract.h"

namespace etspec {

void Stats::record_decode() { ++shape_steps[contract::kNoDraftShape]; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Stats::Stats() {
  for (const char* s : contract::kStages) stage_s[s] = 0.0;
}

void Stats::record_verify(int64_t proposed, int64_t accepted, int64_t height,
                          const std::string& shape) {
  ++verify_calls;
  drafted_tokens += proposed;
  accepted_tokens += accepted;
  if (!shape.empty()) {
    ++shape_steps[shape];
    shape_drafted[shape] += proposed;
    shape_accepted[shape] += accepted;
  }
  while (static_cast<int64_t>(proposed_pos.size()) < height) {
    proposed_pos.push_back(0);
    accept_pos.push_back(0);
  }
  for (int64_t i = 0; i < height; ++i) ++proposed_pos[i];
  for (int64_t i = 0; i < accepted; ++i) ++accept_pos[i];
}

namespace {

void write_json(std::ostream& o, int64_t v) { o << v; }
void write_json(std::ostream& o, double v) { o << v; }
void write_json(std::ostream& o, const std::vector<int64_t>& v) {
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
}
template <typename T>
void write_json(std::ostream& o, const std::map<std::string, T>& m) {
  o << "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    o << (first ? "" : ", ") << "\"" << k << "\": " << v;
    first = false;
  }
  o << "}";
}

}  // namespace

std::string Stats::to_json() const {
  std::ostringstream o;
  o.precision(9);
  const char* sep = "{";
#define ETSPEC_COUNTED(name) name
#define ETSPEC_DERIVED(name) name()
#define ETSPEC_FIELD(name, kind)        \
  o << sep << "\"" #name "\": ";        \
  write_json(o, ETSPEC_##kind(name)); \
  sep = ", ";
  ETSPEC_STATS_FIELDS(ETSPEC_FIELD)
#undef ETSPEC_FIELD
#undef ETSPEC_DERIVED
#undef ETSPEC_COUNTED
  o << "}";
  return o.str();
}

StageTimer::StageTimer(Stats& stats, const char* stage)
    : stats_(stats), stage_(stage), t0_(std::chrono::steady_clock::now()) {}
StageTimer::~StageTimer() { stats_.stage_s[stage_] += seconds_since(t0_); }

}  // namespace etspec
