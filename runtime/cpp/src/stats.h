// runtime/stats.py's GenerationStats: calls, acceptance, per-stage time, memory. to_json
// writes contract.STATS_FIELDS in order (ETSPEC_STATS_FIELDS: members for counted fields,
// methods for derived ones), so both runtimes print the same JSON.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace etspec {

struct Stats {
  // cached_tokens: leading prompt tokens whose KV the last request left (not prefilled).
  int64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0, prefill_calls = 0, decode_calls = 0,
          verify_calls = 0, draft_calls = 0, commit_calls = 0, drafted_tokens = 0,
          accepted_tokens = 0;
  std::vector<int64_t> accept_pos, proposed_pos;
  // Verify steps per shape ("lookup": prompt lookup's offers, "none": a decode) and their
  // drafted and accepted tokens (stats.py).
  std::map<std::string, int64_t> shape_steps, shape_drafted, shape_accepted;
  std::map<std::string, double> stage_s;
  double ttft_s = 0, total_s = 0;
  std::map<std::string, int64_t> memory;

  Stats();
  int64_t rejected_tokens() const { return drafted_tokens - accepted_tokens; }
  double acceptance_rate() const {
    return drafted_tokens ? double(accepted_tokens) / drafted_tokens : 0.0;
  }
  double accept_length() const {
    return verify_calls ? double(accepted_tokens) / verify_calls : 0.0;
  }
  double tpc() const { return verify_calls ? accept_length() + 1.0 : 0.0; }
  double decode_s() const { return std::max(total_s - ttft_s, 0.0); }  // after the first token
  double tpot_s() const {
    return generated_tokens > 1 ? decode_s() / (generated_tokens - 1) : 0.0;
  }
  double tokens_per_s() const {
    return generated_tokens > 1 && decode_s() > 0 ? (generated_tokens - 1) / decode_s() : 0.0;
  }
  // One verify that checked `proposed` draft tokens in a tree `height` levels deep.
  // One step of a speculative generator that proposed nothing (a plain decode).
  void record_decode();
  void record_verify(int64_t proposed, int64_t accepted, int64_t height,
                     const std::string& shape);
  std::string to_json() const;
};

double seconds_since(std::chrono::steady_clock::time_point t0);

// Times a stage (a contract::kStage*) into Stats::stage_s for the scope's lifetime.
class StageTimer {
 public:
  StageTimer(Stats& stats, const char* stage);
  ~StageTimer();

 private:
  Stats& stats_;
  const char* stage_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace etspec
