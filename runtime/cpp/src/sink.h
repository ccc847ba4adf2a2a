// runtime/sink.py's stop rules: the budget, EOS (kept), streaming each emission's new ids.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace etspec {

// Streaming: called with each emission's new ids.
using TokenCallback = std::function<void(const std::vector<int64_t>&)>;

class Sink {
 public:
  Sink(std::vector<int64_t> prompt, int64_t max_new, std::set<int64_t> eos,
       const TokenCallback& callback);
  int64_t remaining() const {
    return stop.empty() ? max_new_ - static_cast<int64_t>(tokens.size()) : 0;
  }
  // Takes what the budget and EOS allow of `offered`; false once generation must stop.
  bool emit(const std::vector<int64_t>& offered);
  // The prompt and everything emitted so far (what prompt lookup searches).
  const std::vector<int64_t>& history() const { return history_; }

  std::vector<int64_t> tokens;  // emitted
  std::string stop;             // a contract::kStop* once stopped

 private:
  std::vector<int64_t> history_;
  int64_t max_new_;
  std::set<int64_t> eos_;
  const TokenCallback& callback_;
};

}  // namespace etspec
