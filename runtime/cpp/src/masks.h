// Attention masks as the methods take them (runtime/masks.py): a mask's width is the one
// dynamic dimension of every attending method; its first `committed(width)` columns are
// committed slots [0, n) and its last `scratch()` columns the scratch slots. A target with
// sliding layers (`window` > 0) also takes their band after the mask.
#pragma once

#include <cstdint>
#include <vector>

namespace etspec {

struct MaskLayout {
  int64_t max_context = 0, cache_size = 0, window = 0;
  int64_t scratch() const { return cache_size - max_context; }
  // contract.mask_width: columns of a mask that shows committed slots [0, needed).
  int64_t width(int64_t needed) const;
  int64_t committed(int64_t width) const { return width - scratch(); }
  int64_t column(int64_t slot, int64_t width) const {
    return slot < max_context ? slot : slot - max_context + committed(width);
  }
  // Causal rows at `positions` (slot == position), as narrow as they allow; sets `width`.
  std::vector<float> causal(const std::vector<int64_t>& positions, int64_t& width) const;
  // The sliding layers' band after a `width`-column mask for rows whose lowest position is
  // `lowest` (contract.band_start: committed slots [start, n), then the scratch slots);
  // empty without sliding layers (no band input).
  std::vector<int64_t> band(int64_t lowest, int64_t width) const;
};

// start, start + 1, ..., start + n - 1 (positions and slots of consecutive rows).
std::vector<int64_t> iota(int64_t start, int64_t n);

}  // namespace etspec
