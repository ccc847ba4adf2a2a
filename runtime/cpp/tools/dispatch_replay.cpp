// etspec_dispatch_replay: --tree auto's dispatcher (speculative/dispatcher.h) on recorded
// costs and a recorded acceptance sequence, for tests that hold its choices to the Python
// dispatcher's. Step i runs the chosen shape, accepts min(depths[i], its height) tokens and
// takes costs.predict(what it ran) * (1 + noise[i]) seconds.
//   etspec_dispatch_replay REQUEST.json
//   request {"verify_width", "verify_widths", "branching", "costs": {"verify_s": {W: s},
//            "draft_step_s", "draft_extend_s", "step_width", "decode_s"}, "depths": [...],
//            "noise": [...], "offers": [...] (optional: tokens the drafter offered),
//            "evidence": [...] (optional: each offer's Proposal::evidence; "" for none)}
//   answer  {"candidates": [name...], "chosen": [name per step], "estimates": {name: tok/s}}
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "speculative/dispatcher.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: etspec_dispatch_replay REQUEST.json\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    const auto req = nlohmann::json::parse(text.str());
    etspec::TargetMetadata meta;
    meta.verify_width = req.at("verify_width").get<int64_t>();
    meta.verify_widths = req.at("verify_widths").get<std::vector<int64_t>>();
    etspec::StepCosts costs;
    const auto& c = req.at("costs");
    for (const auto& [w, s] : c.at("verify_s").items()) costs.verify_s[std::stoll(w)] = s;
    costs.draft_step_s = c.at("draft_step_s");
    costs.draft_extend_s = c.at("draft_extend_s");
    costs.step_width = c.at("step_width");
    costs.decode_s = c.value("decode_s", 0.0);
    etspec::AutoTree policy(etspec::auto_candidates(meta, req.at("branching")),
                            meta.verify_widths);
    policy.use_costs(costs);
    const auto depths = req.at("depths").get<std::vector<int64_t>>();
    const auto noise = req.at("noise").get<std::vector<double>>();
    // Optional: how many tokens the drafter offered at each step (prompt lookup's match);
    // without it every step drafts its shape's full height.
    const auto offers = req.value("offers", std::vector<int64_t>(depths.size(), 1 << 20));
    // Optional: what each offer was found by; a step with evidence is cut by trim().
    const auto evidence =
        req.value("evidence", std::vector<std::string>(depths.size(), std::string()));
    nlohmann::json answer = {{"candidates", nlohmann::json::array()},
                             {"chosen", nlohmann::json::array()},
                             {"estimates", nlohmann::json::object()}};
    for (size_t i = 0; i < depths.size(); ++i) {
      const etspec::TreeShape& shape = policy.choose();
      int64_t height = std::min(offers[i], shape.max_height), allowed = shape.max_height;
      if (!evidence[i].empty() && height > 0) {
        const int64_t keep = policy.trim(shape, height, evidence[i]);
        if (keep < height) height = allowed = keep;
      }
      // A chain costs what it drafted: a short offer verifies a narrower tree.
      const bool chain = dynamic_cast<const etspec::ChainShape*>(&shape) != nullptr;
      const double seconds = (chain ? costs.predict_chain(height, meta.verify_widths)
                                    : costs.predict(shape, meta.verify_widths)) *
                             (1 + noise[i]);
      policy.observe(shape, {height, std::min(depths[i], height), seconds, allowed, true,
                             evidence[i]});
      // With evidence, the chosen shape and how far it was cut.
      answer["chosen"].push_back(evidence[i].empty()
                                     ? shape.name
                                     : shape.name + "/" + std::to_string(height));
    }
    for (const etspec::TreeShape* s : policy.candidates()) {
      answer["candidates"].push_back(s->name);
      answer["estimates"][s->name] = policy.estimate(*s);
    }
    std::cout << answer.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
