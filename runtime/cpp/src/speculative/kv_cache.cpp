#include "speculative/kv_cache.h"

#include <algorithm>

#include "prefill.h"

namespace etspec {

std::vector<Tensor> VerifyCall::run(TargetProgram& target) {
  if (decode) {
    return run_attending(target, method, {longs(tokens), longs(positions), floats(mask, 1, width)},
                         band);
  }
  return run_attending(target, method,
                       {longs(tokens), longs(positions), longs(slots), floats(mask, rows, width)},
                       band);
}

SpecKVCacheManager::SpecKVCacheManager(const TargetMetadata& meta, const std::string& strategy,
                                       int64_t committed)
    : meta_(meta),
      layout_{meta.max_context, meta.cache_size, meta.sliding_window},
      overwrite_(strategy == contract::kPositionOverwrite),
      committed_(committed) {}

VerifyCall SpecKVCacheManager::decode_inputs(int64_t token) {
  const int64_t c = committed_;
  VerifyCall call;
  call.decode = true;
  call.method = contract::kTARGET_DECODE;
  call.rows = 1;
  call.tokens = {token};
  call.positions = {c};
  call.mask = layout_.causal(call.positions, call.width);
  call.band = layout_.band(c, call.width);
  base_ = c;
  return call;
}

VerifyCall SpecKVCacheManager::verify_inputs(const DraftTree& tree) {
  const int64_t c = committed_, m1 = tree.size() + 1;
  if (m1 == 1) return decode_inputs(tree.tokens[0]);
  VerifyCall call;
  const int64_t k = meta_.verify_width_for(m1);
  base_ = overwrite_ ? c : meta_.max_context;
  call.method = meta_.verify_method(k);
  call.rows = k;
  call.tokens.assign(k, 0);
  std::copy(tree.tokens.begin(), tree.tokens.end(), call.tokens.begin());
  call.slots = iota(base_, k);
  call.positions.resize(k);
  for (int64_t i = 0; i < k; ++i) call.positions[i] = i < m1 ? c + tree.depth[i] : c + i;
  const int64_t s = layout_.width(overwrite_ ? c + k : c);
  call.width = s;
  call.mask.assign(k * s, contract::kMaskMin);
  for (int64_t i = 0; i < k; ++i) {
    float* row = call.mask.data() + i * s;
    if (i >= m1) {
      row[layout_.column(call.slots[i], s)] = 0.0f;
      continue;
    }
    std::fill_n(row, c, 0.0f);
    for (int64_t j = i;; j = tree.parents[j]) {
      row[layout_.column(call.slots[j], s)] = 0.0f;
      if (j == 0) break;
    }
  }
  call.band = layout_.band(c, s);
  return call;
}

int64_t SpecKVCacheManager::commit(TargetProgram& target, const std::vector<int64_t>& nodes) {
  // Commit by path index: the accepted rows go to c, c + 1, ...; a path already there
  // (a chain or first-branch path under position-overwrite) needs no call.
  const int64_t c = committed_, w = meta_.verify_width, n = nodes.size();
  std::vector<int64_t> src = iota(base_, w), dst = src;
  bool moved = false;
  for (int64_t i = 0; i < n; ++i) {
    src[i] = base_ + nodes[i];
    dst[i] = c + i;
    moved = moved || src[i] != dst[i];
  }
  committed_ = c + n;
  if (!moved) return 0;
  target.run(contract::kTARGET_COMMIT, {longs(src), longs(dst)});
  return 1;
}

}  // namespace etspec
