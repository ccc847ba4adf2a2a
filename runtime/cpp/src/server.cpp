// etspec_server: an OpenAI-compatible HTTP server over one Runner (cpp-httplib, vendored, as
// llama-server uses it). `etspec serve` runs it.
//
//   etspec_server --target T.pte [--draft D.pte] [--host 127.0.0.1] [--port 8080] [--queue 8]
//
// POST /v1/chat/completions and /v1/completions (stream true/false as server-sent events),
// GET /v1/models and /health. One generation at a time; up to --queue requests wait, one
// more is answered 429. Every request reuses what the KV cache holds of its prompt (a
// conversation's turns before). A bad request is a 4xx JSON error and serving goes on.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include <httplib/httplib.h>
#include <nlohmann/json.hpp>

#include "openai.h"
#include "runner.h"

namespace {

using etspec::ApiError;
using etspec::ApiRequest;
using etspec::Endpoint;

struct Server {
  std::unique_ptr<etspec::Runner> runner;
  std::string model;
  int queue = 8;
  std::mutex generating;
  std::atomic<int> pending{0};
  std::atomic<int64_t> next_id{0};
};

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(etspec::error_json(status, message), "application/json");
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The prompt ids, and the runner's own refusals that can be made before streaming starts.
std::vector<int64_t> prompt_ids(Server& server, const ApiRequest& request) {
  const etspec::Runner& runner = *server.runner;
  std::vector<int64_t> ids = request.endpoint == Endpoint::kChat
                                 ? runner.chat_ids(request.messages)
                                 : runner.encode(request.prompt);
  const int64_t limit = runner.meta().max_context, n = ids.size();
  if (n >= limit) {
    throw etspec::Error(etspec::message(
        "prompt_fills_context", {{"tokens", std::to_string(n)}, {"limit", std::to_string(limit)}}));
  }
  const int64_t max_new = request.config.max_new_tokens;
  if (max_new != -1 && max_new > limit - n) {
    throw etspec::Error(etspec::message("prompt_exceeds_context",
                                        {{"tokens", std::to_string(n)},
                                         {"max_new", std::to_string(max_new)},
                                         {"limit", std::to_string(limit)},
                                         {"room", std::to_string(limit - n)}}));
  }
  return ids;
}

// Holds a place in the queue for as long as it lives.
struct Place {
  std::atomic<int>& pending;
  ~Place() { --pending; }
};

void complete(Server& server, const httplib::Request& req, httplib::Response& res,
              Endpoint endpoint) {
  ApiRequest request;
  std::vector<int64_t> ids;
  try {
    request = etspec::parse_request(req.body, endpoint);
    ids = prompt_ids(server, request);
    etspec::Sampler check(request.config.sampling);  // refuses bad sampling settings now
  } catch (const ApiError& e) {
    return send_error(res, e.status, e.message);
  } catch (const etspec::Error& e) {
    return send_error(res, 400, e.what());
  }
  if (++server.pending > server.queue + 1) {
    --server.pending;
    return send_error(res, 429, "the server is busy: " + std::to_string(server.queue) +
                                    " requests are waiting; retry later");
  }
  const std::string id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") +
                         std::to_string(server.next_id++);
  const int64_t created = now_s();
  if (!request.stream) {
    Place place{server.pending};
    std::lock_guard<std::mutex> lock(server.generating);
    etspec::StopScanner scan(request.stop);
    std::string text;
    auto on_tokens = [&](const std::vector<int64_t>&, const std::string& piece) {
      text += scan.push(piece);
      return !scan.stopped();
    };
    try {
      const etspec::Result result =
          server.runner->generate(etspec::Prompt(ids), request.config, nullptr, nullptr, on_tokens);
      text += scan.flush();
      res.set_content(etspec::answer_json(request, id, server.model, created, result, text,
                                          scan.stopped()),
                      "application/json");
    } catch (const etspec::Error& e) {
      send_error(res, 400, e.what());
    }
    return;
  }
  auto place = std::make_shared<Place>(Place{server.pending});
  res.set_chunked_content_provider(
      "text/event-stream",
      [&server, request, ids, id, created, place](size_t, httplib::DataSink& sink) {
        std::lock_guard<std::mutex> lock(server.generating);
        const auto send = [&sink](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          return sink.write(event.data(), event.size());
        };
        etspec::StopScanner scan(request.stop);
        bool first = true, open = true;
        const auto deliver = [&](const std::string& text) {
          if (text.empty() && !first) return;
          open = open && send(etspec::chunk_json(request, id, server.model, created, text, "", "",
                                                 first));
          first = false;
        };
        auto on_tokens = [&](const std::vector<int64_t>&, const std::string& piece) {
          deliver(scan.push(piece));
          return open && !scan.stopped();  // a closed connection stops the generation
        };
        try {
          const etspec::Result result = server.runner->generate(
              etspec::Prompt(ids), request.config, nullptr, nullptr, on_tokens);
          deliver(scan.flush());
          const std::string reason = etspec::finish_reason(result, scan.stopped());
          send(etspec::chunk_json(request, id, server.model, created, "", reason, "", false));
          if (request.include_usage) {
            send(etspec::chunk_json(request, id, server.model, created, "", "",
                                    etspec::usage_json(result), false));
          }
        } catch (const etspec::Error& e) {
          send(etspec::error_json(400, e.what()));
        }
        send("[DONE]");
        sink.done();
        return true;
      });
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "error: " << why
            << "; usage: etspec_server --target T.pte [--draft D.pte] [--host 127.0.0.1] "
               "[--port 8080] [--queue 8]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string target, draft, host = "127.0.0.1";
  int port = 8080;
  Server server;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    try {
      if (a == "--target") {
        target = v;
      } else if (a == "--draft") {
        draft = v;
      } else if (a == "--host") {
        host = v;
      } else if (a == "--port") {
        port = std::stoi(v);
      } else if (a == "--queue") {
        server.queue = std::stoi(v);
      } else {
        usage("unknown option " + a);
      }
    } catch (const std::logic_error&) {
      usage(a + " takes a number, got " + v);
    }
  }
  if (target.empty()) usage("--target is required");
  if (port < 0 || port > 65535 || server.queue < 0) usage("--port 0-65535, --queue >= 0");
  try {
    const etspec::LoadOptions options;  // the defaults: the draft and lookup combined, auto
    server.runner = etspec::Runner::load(target, draft, options);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  const size_t slash = target.find_last_of('/');
  server.model = target.substr(slash == std::string::npos ? 0 : slash + 1);

  httplib::Server http;
  http.set_payload_max_length(etspec::kMaxBodyBytes);
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      const char* why = res.status == 404   ? "no such endpoint"
                        : res.status == 413 ? "the request body is too large"
                                            : httplib::status_message(res.status);
      res.set_content(etspec::error_json(res.status, why), "application/json");
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
        std::string why = "internal error";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          why = x.what();
        } catch (...) {
        }
        send_error(res, 500, why);
      });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/v1/models", [&server](const httplib::Request&, httplib::Response& res) {
    const nlohmann::json model = {
        {"id", server.model}, {"object", "model"}, {"created", 0}, {"owned_by", "etspec"}};
    const nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array({model})}};
    res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
  });
  http.Post("/v1/chat/completions", [&server](const httplib::Request& req, httplib::Response& res) {
    complete(server, req, res, Endpoint::kChat);
  });
  http.Post("/v1/completions", [&server](const httplib::Request& req, httplib::Response& res) {
    complete(server, req, res, Endpoint::kCompletion);
  });
  const int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    std::cerr << "error: cannot listen on " << host << ":" << port
              << " (in use, or not this machine's address); pick another --port or --host\n";
    return 1;
  }
  std::cerr << "etspec server: http://" << host << ":" << bound << "/v1 (model " << server.model
            << ")\n"
            << std::flush;
  http.listen_after_bind();
  return 0;
}
