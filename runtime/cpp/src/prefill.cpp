#include "prefill.h"

#include <algorithm>

#include "masks.h"

using executorch::runtime::EValue;

namespace etspec {

std::vector<Tensor> run_attending(Program& target, const std::string& method,
                                  std::vector<executorch::extension::TensorPtr> inputs,
                                  std::vector<int64_t>& band) {
  if (!band.empty()) inputs.push_back(longs(band));
  return target.run(method, std::vector<EValue>(inputs.begin(), inputs.end()));
}

PrefillResult prefill_target(TargetProgram& target, const std::vector<int64_t>& prompt,
                             int64_t start) {
  const auto& meta = target.meta;
  const int64_t chunk = meta.prefill_chunk, n = prompt.size() - start;
  const MaskLayout layout{meta.max_context, meta.cache_size, meta.sliding_window};
  PrefillResult result;
  for (int64_t lo = 0; lo < n; lo += chunk) {
    const int64_t real = std::min(chunk, n - lo);
    std::vector<int64_t> ids(chunk, 0), positions = iota(start + lo, chunk), last{real - 1};
    std::copy_n(prompt.begin() + start + lo, real, ids.begin());
    int64_t width = 0;
    std::vector<float> mask = layout.causal(positions, width);
    std::vector<int64_t> band = layout.band(start + lo, width);
    auto out = run_attending(target, contract::kTARGET_PREFILL,
                             {longs(ids), longs(positions), longs(last),
                              floats(mask, chunk, width)},
                             band);
    result.logits = out[0].data;
    Tensor& hidden = result.hidden;
    if (hidden.sizes.empty()) hidden.sizes = {0, out[1].cols()};
    hidden.data.insert(hidden.data.end(), out[1].data.begin(),
                       out[1].data.begin() + real * out[1].cols());
    hidden.sizes[0] += real;
    ++result.calls;
  }
  return result;
}

}  // namespace etspec
