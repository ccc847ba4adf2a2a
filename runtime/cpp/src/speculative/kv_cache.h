// SpecKVCacheManager (runtime/speculative/kv_cache.py): where a verify writes its rows and
// how the accepted path is committed. position-overwrite writes row i at slot committed + i
// (a chain's path is then already in place); scratch-commit writes into the scratch slots
// past the context and copies the accepted path down. Either way, after commit the slots
// [0, committed) hold exactly the KV of the committed tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "masks.h"
#include "program.h"
#include "speculative/tree.h"

namespace etspec {

// One verify call's inputs, owning the storage its tensors point at.
struct VerifyCall {
  std::string method;
  bool decode = false;  // nothing proposed: the root alone runs target_decode
  int64_t rows = 0, width = 0;
  std::vector<int64_t> tokens, positions, slots, band;
  std::vector<float> mask;
  std::vector<Tensor> run(TargetProgram& target);
};

class SpecKVCacheManager {
 public:
  SpecKVCacheManager(const TargetMetadata& meta, const std::string& strategy, int64_t committed);
  // Row i of `tree` at RoPE position committed + depth[i]; it sees the committed prefix, its
  // ancestors and itself; pad rows past the tree see only their own slot.
  VerifyCall verify_inputs(const DraftTree& tree);
  // One target_decode of `token` (the root) at the committed length: it writes the root's
  // committed slot directly, so the commit({0}) that follows has nothing to move.
  VerifyCall decode_inputs(int64_t token);
  // Commits the rows `nodes` (the accepted path, root first) of the last verify; returns the
  // target calls made (0 when the path already sits where it belongs).
  int64_t commit(TargetProgram& target, const std::vector<int64_t>& nodes);
  int64_t committed() const { return committed_; }

 private:
  const TargetMetadata& meta_;
  MaskLayout layout_;
  bool overwrite_;
  int64_t committed_;
  int64_t base_ = 0;  // slot of the last verify's row 0
};

}  // namespace etspec
