#include "generator.h"

#include "masks.h"

namespace etspec {

int64_t TextTokenGenerator::generate(GenerationContext& ctx, Sink& sink) {
  const auto& meta = ctx.target.meta;
  const MaskLayout layout{meta.max_context, meta.cache_size, meta.sliding_window};
  int64_t token = ctx.first_token, position = ctx.prompt.size();
  while (sink.remaining() > 0) {
    std::vector<int64_t> tok{token}, pos{position};
    std::vector<Tensor> out;
    {
      StageTimer timer(ctx.stats, contract::kStageDecode);
      int64_t width = 0;
      std::vector<float> mask = layout.causal(pos, width);
      std::vector<int64_t> band = layout.band(position, width);
      out = run_attending(ctx.target, contract::kTARGET_DECODE,
                          {longs(tok), longs(pos), floats(mask, 1, width)}, band);
    }
    ++ctx.stats.decode_calls;
    ++position;  // the index of the token picked now
    token = ctx.sampler.pick(out[0].data.data(), meta.vocab_size, position);
    if (!sink.emit({token})) break;
  }
  return position;
}

}  // namespace etspec
