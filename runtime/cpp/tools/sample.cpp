// etspec_sample: the sampler (sampler.h) on rows of logits, for tests that hold its
// distribution to the Python runtime's (runtime/sampling.py Sampler.dist).
//   etspec_sample LOGITS.f32 ROWS VOCAB TEMPERATURE TOP_K TOP_P
//   prints per row: "n id:prob id:prob ..." (the kept tokens), or "error: ..." for a row
//   nothing can be drawn from
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "sampler.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: etspec_sample LOGITS.f32 ROWS VOCAB TEMPERATURE TOP_K TOP_P\n");
    return 2;
  }
  const long rows = std::atol(argv[2]), vocab = std::atol(argv[3]);
  std::vector<float> logits(rows * vocab);
  FILE* f = std::fopen(argv[1], "rb");
  if (!f || std::fread(logits.data(), sizeof(float), logits.size(), f) != logits.size()) {
    std::fprintf(stderr, "error: cannot read %s\n", argv[1]);
    return 1;
  }
  std::fclose(f);
  etspec::SamplingConfig config;
  config.temperature = std::atof(argv[4]);
  config.top_k = std::atol(argv[5]);
  config.top_p = std::atof(argv[6]);
  etspec::Sampler sampler(config);
  for (long r = 0; r < rows; ++r) {
    try {
      const etspec::TokenDist d = sampler.dist(logits.data() + r * vocab, vocab);
      std::printf("%zu", d.ids.size());
      for (size_t i = 0; i < d.ids.size(); ++i) {
        std::printf(" %lld:%.17g", static_cast<long long>(d.ids[i]), d.probs[i]);
      }
      std::printf("\n");
    } catch (const std::exception& e) {
      std::printf("error: %s\n", e.what());
    }
  }
  return 0;
}
