// SPDX-License-Identifier: GPL-2.0
// Answers that come back by another way than the request went: a lookup
// (where, kill) forwarded along a chain of hosts is answered by the host
// where it ends straight to the host that asked, not back along the chain,
// so that each hop costs one message instead of two
// (Documentation/migd-protocol.md, "Answers straight to the asker").
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace migd {

class Answers {
  public:
    // A request id no other request has had: the host's name, a counter
    // and 64 random bits (an answer is accepted only for an id asked).
    std::string new_id(std::string_view host);

    // One request waiting for its answer, from construction (before the
    // request goes out, so that an early answer is kept) to destruction.
    class Wait {
      public:
        Wait(Answers& a, std::string rid);
        ~Wait();
        Wait(const Wait&) = delete;
        Wait& operator=(const Wait&) = delete;
        // The answer, or nothing if none came within timeout.
        std::optional<nlohmann::json> get(std::chrono::milliseconds timeout);

      private:
        Answers& a_;
        std::string rid_;
    };

    // Hands the answer to its waiting request; false if none waits for rid
    // (it gave up, or rid was never asked here).
    bool deliver(const std::string& rid, nlohmann::json answer);

    // A signal is delivered at most once per request: the host that acted
    // on request rid keeps its answer for a while, and a second arrival of
    // the same request (the asker tried the chain again after the first
    // answer was lost) gets that answer instead of a second signal. once()
    // runs act unless rid was acted on; either way it returns the answer.
    template <class F> nlohmann::json once(const std::string& rid, F act) {
        std::lock_guard lock(done_mu_);
        if (auto a = done_locked(rid))
            return *a;
        nlohmann::json answer = act();
        done_.emplace_back(rid, answer);
        if (done_.size() > kept_done)
            done_.pop_front();
        return answer;
    }

    // The answer kept for request rid, if it was acted on here: asked
    // before anything else about a repeated request (the process its
    // signal ended has exited since, which is not an error).
    std::optional<nlohmann::json> done(const std::string& rid) {
        std::lock_guard lock(done_mu_);
        return done_locked(rid);
    }

  private:
    std::optional<nlohmann::json> done_locked(const std::string& rid) const {
        for (const auto& [id, answer] : done_)
            if (id == rid)
                return answer;
        return std::nullopt;
    }
    static constexpr std::size_t kept_done = 1024;
    struct Slot {
        std::optional<nlohmann::json> answer;
    };
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, Slot> waiting_;
    std::uint64_t counter_ = 0;
    std::mutex done_mu_;
    std::deque<std::pair<std::string, nlohmann::json>> done_;
};

} // namespace migd
