#include "sink.h"

#include "etspec_contract.h"
#include "tokenizer.h"

namespace etspec {

Sink::Sink(std::vector<int64_t> prompt, int64_t max_new, std::set<int64_t> eos,
           StreamDecoder* decoder, const TokenCallback& callback,
           const std::atomic<bool>* stop)
    : history_(std::move(prompt)),
      max_new_(max_new),
      eos_(std::move(eos)),
      decoder_(decoder),
      callback_(callback),
      stop_requested_(stop) {}

bool Sink::emit(const std::vector<int64_t>& offered) {
  std::vector<int64_t> take;
  for (int64_t t : offered) {
    if (static_cast<int64_t>(take.size()) >= remaining()) break;
    take.push_back(t);
    if (eos_.count(t)) {
      stop = contract::kStopEos;
      break;
    }
  }
  tokens.insert(tokens.end(), take.begin(), take.end());
  history_.insert(history_.end(), take.begin(), take.end());
  if (callback_) {
    const std::string text = decoder_ ? decoder_->push(take) : "";
    if (!callback_(take, text) && stop.empty()) stop = contract::kStopCallback;
  }
  if (stop_requested_ && stop_requested_->load() && stop.empty()) stop = contract::kStopRequested;
  if (stop.empty() && static_cast<int64_t>(tokens.size()) >= max_new_) stop = contract::kStopBudget;
  return stop.empty();
}

}  // namespace etspec
