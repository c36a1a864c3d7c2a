// SPDX-License-Identifier: GPL-2.0
#include "answers.hpp"

#include <random>

#include <fmt/format.h>

namespace migd {

std::string Answers::new_id(std::string_view host) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::uint64_t n;
    {
        std::lock_guard lock(mu_);
        n = ++counter_;
    }
    return fmt::format("{}-{}-{:016x}", host, n, rng());
}

Answers::Wait::Wait(Answers& a, std::string rid) : a_(a), rid_(std::move(rid)) {
    std::lock_guard lock(a_.mu_);
    a_.waiting_[rid_];
}

Answers::Wait::~Wait() {
    std::lock_guard lock(a_.mu_);
    a_.waiting_.erase(rid_);
}

std::optional<nlohmann::json> Answers::Wait::get(std::chrono::milliseconds timeout) {
    std::unique_lock lock(a_.mu_);
    auto& slot = a_.waiting_[rid_];
    a_.cv_.wait_for(lock, timeout, [&] { return slot.answer.has_value(); });
    return std::exchange(slot.answer, std::nullopt);
}

bool Answers::deliver(const std::string& rid, nlohmann::json answer) {
    {
        std::lock_guard lock(mu_);
        const auto it = waiting_.find(rid);
        if (it == waiting_.end())
            return false;
        it->second.answer = std::move(answer);
    }
    cv_.notify_all();
    return true;
}

} // namespace migd
