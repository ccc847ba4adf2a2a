// etspec_dispatch_replay: the dispatcher (speculative/dispatcher.h) on recorded costs and a
// recorded sequence of steps, for tests that hold its choices to the Python dispatcher's.
// Step i offers `offers[i]` lookup tokens found by `evidence[i]` (0: no offer), runs what
// the dispatcher chooses, accepts min(depths[i], its height) tokens, and its calls take
// the recorded costs times (1 + noise[i]); a step that passes the offer over scores it
// against emitted tokens that follow it for depths[i] tokens; a second request begins halfway
// (tests/runtime/cpp/test_cpp_dispatcher.py).
//   etspec_dispatch_replay REQUEST.json
//   request {"verify_width", "verify_widths", "branching", "model", "decode", "lookup",
//            "costs": {"verify_s": {W: s}, "draft_s", "step_width", "decode_s"},
//            "depths": [...], "noise": [...], "offers": [...], "evidence": [...]}
//   answer  {"candidates": [name...], "chosen": [name or lookupM per step],
//            "estimates": {name: tok/s}, "rated": steps whose ways were rated}
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
    costs.draft_s = c.at("draft_s");
    costs.step_width = c.at("step_width");
    costs.decode_s = c.at("decode_s");
    std::vector<std::unique_ptr<etspec::TreeShape>> shapes;
    if (req.at("model").get<bool>()) shapes = etspec::auto_candidates(meta, req.at("branching"));
    etspec::Dispatcher policy(std::move(shapes), meta.verify_widths, req.at("decode"),
                              req.at("lookup"));
    policy.use_costs(costs);
    const auto depths = req.at("depths").get<std::vector<int64_t>>();
    const auto noise = req.at("noise").get<std::vector<double>>();
    const auto offers = req.at("offers").get<std::vector<int64_t>>();
    const auto evidence = req.at("evidence").get<std::vector<std::string>>();
    const auto width_for = [&](int64_t rows) {
      for (int64_t w : meta.verify_widths) {
        if (w >= rows) return w;
      }
      return meta.verify_widths.back();
    };
    nlohmann::json answer = {{"candidates", nlohmann::json::array()},
                             {"chosen", nlohmann::json::array()},
                             {"estimates", nlohmann::json::object()}};
    for (size_t i = 0; i < depths.size(); ++i) {
      if (i == depths.size() / 2) policy.begin();  // a second request
      std::optional<etspec::Offer> offer;
      if (offers[i] > 0) offer = etspec::Offer{std::vector<int64_t>(offers[i], 0), evidence[i]};
      const etspec::Choice choice = policy.choose(offer ? &*offer : nullptr, 1 << 20);
      const double slow = 1 + noise[i];
      etspec::StepOutcome step;
      std::string name;
      if (choice.decodes()) {
        step.target_s = costs.decode_s * slow;
        step.rows = 1;
        step.seconds = step.target_s + 0.0002 * slow;
        name = choice.shape->name;
      } else if (choice.lookup) {
        step.height = step.allowed = choice.lookup;
        step.accepted = std::min(depths[i], choice.lookup);
        step.rows = width_for(choice.lookup + 1);
        step.target_s = costs.verify_s.at(step.rows) * slow;
        step.seconds = step.target_s + 0.0003 * slow;
        step.evidence = evidence[i];
        name = "lookup" + std::to_string(choice.lookup);
      } else {
        const etspec::TreeShape& shape = *choice.shape;
        step.height = step.allowed = shape.max_height;
        step.accepted = std::min(depths[i], shape.max_height);
        step.rows = width_for(shape.max_nodes + 1);
        step.target_s = costs.verify_s.at(step.rows) * slow;
        // The catch-up (one extend, twice a level's seconds), then the levels; a tree's
        // level costs half again a chain's (its gathers).
        step.extend_calls = 1;
        step.extend_s = 2 * costs.draft_s * slow;
        step.draft_calls = 1 + shape.levels;
        const double level = shape.max_nodes > shape.max_height ? 1.5 : 1.0;
        step.draft_s = step.extend_s + shape.levels * level * costs.draft_s * slow;
        step.seconds = step.target_s + step.draft_s + 0.0004 * slow;
        if (shape.max_nodes > shape.max_height) {  // a tree: its first branch one short
          step.main_height = shape.max_height - 1;
          step.main_accepted = std::min(depths[i], step.main_height);
        }
        name = shape.name;
      }
      policy.observe(choice, step);
      if (offer && !choice.lookup) {  // the text follows the offer (zeros) for depths[i] tokens
        std::vector<int64_t> emitted(step.emitted(), 1);
        for (int64_t j = 0; j < std::min(depths[i], step.emitted()); ++j) emitted[j] = 0;
        policy.shadow(*offer, emitted.data(), step.emitted());
      }
      answer["chosen"].push_back(name);
    }
    for (const etspec::TreeShape* s : policy.candidates()) {
      answer["candidates"].push_back(s->name);
      answer["estimates"][s->name] = policy.estimate(*s);
    }
    answer["rated"] = policy.rated();
    std::cout << answer.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
