// runtime/sink.py's stop rules: the budget, EOS (kept), a callback that says stop, stop()
// from another thread; and streaming each emission's new ids with the text they complete.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace etspec {

class StreamDecoder;

// Streaming: each emission's new ids and the text they complete ("" without a tokenizer,
// or while a character is still incomplete). Returning false stops generation.
using TokenCallback = std::function<bool(const std::vector<int64_t>& ids, const std::string& text)>;

class Sink {
 public:
  // `decoder` (may be null) turns ids into text; `stop` (may be null) is polled after each
  // emission.
  Sink(std::vector<int64_t> prompt, int64_t max_new, std::set<int64_t> eos,
       StreamDecoder* decoder, const TokenCallback& callback,
       const std::atomic<bool>* stop = nullptr);
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
  StreamDecoder* decoder_;
  const TokenCallback& callback_;
  const std::atomic<bool>* stop_requested_;
};

}  // namespace etspec
