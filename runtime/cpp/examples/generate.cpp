// The smallest app that embeds etspec: load a target (and an EAGLE-3 draft), stream the
// text of one prompt, print the stats. Builds against the installed CMake package
// (examples/CMakeLists.txt).
//
//   etspec_example TARGET.pte [DRAFT.pte] "prompt"
#include <iostream>
#include <string>

#include <etspec/runner.h>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: etspec_example TARGET.pte [DRAFT.pte] PROMPT\n";
    return 2;
  }
  const std::string target = argv[1], draft = argc == 4 ? argv[2] : "", prompt = argv[argc - 1];
  try {
    etspec::LoadOptions options;  // chain of 3 by default; options.tree.mode = "dynamic" etc.
    auto runner = etspec::Runner::load(target, draft, options);
    etspec::GenerationConfig config;
    config.max_new_tokens = 32;
    const auto result = runner->generate(
        prompt, config, [](const std::string& text) { std::cout << text << std::flush; },
        [](const etspec::Stats& stats) {
          std::cerr << "\n[" << stats.generated_tokens << " tokens, TPC " << stats.tpc() << "]\n";
        });
    std::cout << "\n";
    return result.token_ids.empty() ? 1 : 0;
  } catch (const etspec::Error& e) {  // anything a user can cause, as one line
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
