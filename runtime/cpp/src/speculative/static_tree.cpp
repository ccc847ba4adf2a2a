#include "speculative/static_tree.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <queue>
#include <regex>
#include <set>
#include <stdexcept>
#include <tuple>

#include "artifact.h"

namespace etspec {

namespace {

using Path = std::vector<int64_t>;

// Prior acceptance of the draft's rank-r token (contract.DEFAULT_RANK_ACCEPT).
constexpr const double* kRankAccept = contract::kDefaultRankAccept;
constexpr int64_t kRanks = std::size(contract::kDefaultRankAccept);

Path parent_of(const Path& p) { return Path(p.begin(), p.end() - 1); }

std::vector<Path> parse_choices(const std::string& text) {
  // A JSON list of lists of integers, e.g. [[0], [1], [0, 0]].
  std::vector<Path> out;
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto expect = [&](char c) {
    skip();
    if (i >= text.size() || text[i] != c) throw std::invalid_argument("json");
    ++i;
  };
  // After a list item: true past a ',' (another item follows), false past the closing ']'.
  auto more = [&] {
    skip();
    if (i < text.size() && text[i] == ',') {
      ++i;
      return true;
    }
    expect(']');
    return false;
  };
  expect('[');
  skip();
  if (i < text.size() && text[i] == ']') return out;
  do {
    expect('[');
    Path p;
    skip();
    if (i < text.size() && text[i] == ']') {
      ++i;
    } else {
      do {
        skip();
        size_t used = 0;
        p.push_back(std::stoll(text.substr(i), &used));
        i += used;
      } while (more());
    }
    out.push_back(p);
  } while (more());
  skip();
  if (i != text.size()) throw std::invalid_argument("json");
  return out;
}

// tree_too_wide for a tree described as `name` with `nodes` draft tokens (a number, or
// "over 2^N" past any integer), when a `width`-row verify cannot hold it.
[[noreturn]] void too_wide(const std::string& name, const std::string& nodes,
                           const std::string& need, int64_t width) {
  throw Error(message("tree_too_wide", {{"name", name}, {"nodes", nodes}, {"need", need},
                                        {"width", std::to_string(width)}}));
}

void check_size(const std::string& name, int64_t nodes, std::optional<int64_t> width) {
  if (width && nodes >= *width) {
    too_wide(name, std::to_string(nodes), std::to_string(static_cast<uint64_t>(nodes) + 1),
             *width);
  }
}

std::string path_text(const Path& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + "]";
}

}  // namespace

StaticTree::StaticTree(std::vector<Path> paths, std::string tree_name) {
  std::set<Path> present(paths.begin(), paths.end());
  paths_.assign(present.begin(), present.end());
  std::stable_sort(paths_.begin(), paths_.end(), [](const Path& a, const Path& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  if (paths_.empty()) throw Error(message("static_tree_empty", {}));
  std::set<Path> parents;
  for (const auto& p : paths_) {
    if (p.empty() || *std::min_element(p.begin(), p.end()) < 0) {
      throw Error(message("tree_choice_ranks", {{"path", path_text(p)}}));
    }
    if (p.size() > 1) {
      if (!present.count(parent_of(p))) {
        throw Error(message("tree_choice_parent",
                            {{"path", path_text(p)}, {"parent", path_text(parent_of(p))}}));
      }
      parents.insert(parent_of(p));
    }
  }
  name = tree_name.empty() ? "static" + std::to_string(paths_.size()) : tree_name;
  max_nodes = paths_.size();
  max_height = paths_.back().size();  // paths_ are sorted by length
  fed_nodes = parents.size();
  levels = max_height - 1;
}

StaticTree StaticTree::full(int64_t depth, int64_t branching, std::optional<int64_t> width) {
  if (depth < 1 || branching < 1) throw Error(message("full_tree", {}));
  const std::string name = "D" + std::to_string(depth) + "xBF" + std::to_string(branching);
  if (width) {
    if (branching > 1 && depth * std::log2(double(branching)) > 64) {  // past any width
      const std::string over = "over 2^" + std::to_string(depth);
      too_wide(name, over, over, *width);
    }
    // branching + ... + branching^depth, below 2^65 here: exact in 128 bits.
    __int128 nodes = 0, level = 1;
    for (int64_t d = 0; d < depth; ++d) nodes += (level *= branching);
    if (nodes >= *width) {
      auto text = [](__int128 v) {
        std::string s;
        do s.insert(s.begin(), char('0' + int(v % 10))); while ((v /= 10) > 0);
        return s;
      };
      too_wide(name, text(nodes), text(nodes + 1), *width);
    }
  }
  std::vector<Path> level{{}}, paths;
  for (int64_t d = 0; d < depth; ++d) {
    std::vector<Path> next;
    for (const auto& p : level) {
      for (int64_t r = 0; r < branching; ++r) {
        Path q = p;
        q.push_back(r);
        next.push_back(q);
      }
    }
    paths.insert(paths.end(), next.begin(), next.end());
    level = std::move(next);
  }
  return StaticTree(paths, name);
}

StaticTree StaticTree::pruned(int64_t nodes, std::optional<int64_t> width) {
  if (nodes < 1) {
    throw Error(message("pruned_tree", {{"nodes", std::to_string(nodes)}}));
  }
  check_size("N" + std::to_string(nodes), nodes, width);
  // Best-first by prior (heapq order of the Python runtime: probability, depth, path).
  using Entry = std::tuple<double, int64_t, Path>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> frontier;
  frontier.emplace(-kRankAccept[0], 1, Path{0});
  std::vector<Path> paths;
  while (!frontier.empty() && static_cast<int64_t>(paths.size()) < nodes) {
    auto [neg, len, p] = frontier.top();
    frontier.pop();
    paths.push_back(p);
    const double prob = -neg;
    Path child = p;
    child.push_back(0);
    frontier.emplace(-prob * kRankAccept[0], p.size() + 1, child);
    const int64_t r = p.back() + 1;
    if (r < kRanks) {
      Path sibling = p;
      sibling.back() = r;
      frontier.emplace(-prob / kRankAccept[r - 1] * kRankAccept[r], p.size(), sibling);
    }
  }
  return StaticTree(paths, "N" + std::to_string(paths.size()));
}

StaticTree StaticTree::parse(const std::string& spec, std::optional<int64_t> width) {
  std::smatch m;
  const std::regex full_re(R"(\s*[dD](\d+)\s*[xX-]?\s*[bB][fF](\d+)\s*)");
  const std::regex pruned_re(R"(\s*[nN](\d+)\s*)");
  std::vector<Path> choices;
  try {
    if (std::regex_match(spec, m, full_re)) return full(std::stoll(m[1]), std::stoll(m[2]), width);
    if (std::regex_match(spec, m, pruned_re)) return pruned(std::stoll(m[1]), width);
    choices = parse_choices(spec);
  } catch (const Error&) {
    throw;
  } catch (const std::exception&) {  // bad JSON, or a number past int64 (std::out_of_range)
    const size_t max = contract::kQuoteMax;
    throw Error(message("static_tree_unreadable",
                        {{"spec", spec.size() <= max ? spec : spec.substr(0, max) + "..."}}));
  }
  check_size("static" + std::to_string(choices.size()), choices.size(), width);
  return StaticTree(choices, "");
}

Proposal StaticTree::grow(Expander& expansion, int64_t max_height, Sampler&) const {
  // Each level feeds every node that has children in one batched expansion and places the
  // draft's top-r tokens of each into its ranked children; every node is a deterministic
  // pick, so the verifier treats it as a point mass.
  const auto& ids = *expansion.target_ids;
  std::map<Path, int64_t> row{{Path{}, 0}}, handle{{Path{}, 0}};
  Proposal out;
  int64_t fed = 0;
  size_t i = 0;
  for (size_t depth = 1; i < paths_.size() && static_cast<int64_t>(depth) <= max_height;
       ++depth) {
    std::vector<Path> level;
    for (; i < paths_.size() && paths_[i].size() == depth; ++i) {
      // A parent the draft vocabulary could not fill has no row: drop its subtree.
      if (row.count(parent_of(paths_[i]))) level.push_back(paths_[i]);
    }
    if (level.empty()) break;
    std::vector<Path> heads;
    for (const auto& p : level) {
      const Path h = parent_of(p);
      if (std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(h);
    }
    std::vector<std::vector<float>> logits;
    if (depth == 1) {
      logits.push_back(expansion.root());
    } else {
      std::vector<int64_t> parents, tokens;
      for (const auto& h : heads) {
        parents.push_back(handle.at(parent_of(h)));
        tokens.push_back(out.tokens[row.at(h) - 1]);
      }
      logits = expansion.expand(parents, tokens);
      for (const auto& h : heads) handle[h] = ++fed;
    }
    std::map<Path, std::vector<int64_t>> ranked;
    for (size_t k = 0; k < heads.size(); ++k) {
      int64_t width = 0;
      for (const auto& p : level) {
        if (parent_of(p) == heads[k]) width = std::max(width, p.back() + 1);
      }
      for (int64_t d : top(logits[k], width)) ranked[heads[k]].push_back(ids[d]);
    }
    for (const auto& p : level) {
      const auto& options = ranked[parent_of(p)];
      if (p.back() >= static_cast<int64_t>(options.size())) continue;
      out.tokens.push_back(options[p.back()]);
      out.parents.push_back(row.at(parent_of(p)));
      row[p] = out.tokens.size();
    }
  }
  out.calls = expansion.calls;
  return out;
}

}  // namespace etspec
