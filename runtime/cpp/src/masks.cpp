#include "masks.h"

#include <algorithm>

#include "etspec_contract.h"

namespace etspec {

int64_t MaskLayout::width(int64_t needed) const {
  return contract::mask_width(needed, max_context, cache_size);
}

std::vector<float> MaskLayout::causal(const std::vector<int64_t>& positions,
                                      int64_t& width) const {
  const int64_t top = *std::max_element(positions.begin(), positions.end());
  width = this->width(top + 1);
  const int64_t n = committed(width);
  std::vector<float> mask(positions.size() * width, contract::kMaskMin);
  for (size_t i = 0; i < positions.size(); ++i) {
    float* row = mask.data() + i * width;
    std::fill_n(row, std::min(positions[i] + 1, n), 0.0f);
    for (int64_t j = n; j < width; ++j) {  // scratch columns: slot <= position
      if (max_context + (j - n) <= positions[i]) row[j] = 0.0f;
    }
  }
  return mask;
}

std::vector<int64_t> MaskLayout::band(int64_t lowest, int64_t width) const {
  if (window <= 0) return {};
  const int64_t n = committed(width);
  const int64_t start = contract::band_start(lowest, n, window);
  std::vector<int64_t> slots = iota(start, n - start);
  for (int64_t s = max_context; s < cache_size; ++s) slots.push_back(s);
  return slots;
}

std::vector<int64_t> iota(int64_t start, int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

}  // namespace etspec
