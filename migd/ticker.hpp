// SPDX-License-Identifier: GPL-2.0
// Calls a function every period on its own thread until destroyed; the
// destructor wakes the thread at once instead of waiting out the period (a
// transfer of a small image ends long before a progress tick would).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

namespace migd {

class Ticker {
  public:
    // A zero period starts no thread: fn is never called.
    Ticker(std::chrono::milliseconds period, std::function<void()> fn) {
        if (period.count() <= 0)
            return;
        thread_ = std::thread([this, period, fn = std::move(fn)] {
            std::unique_lock lock(mu_);
            while (!stop_) {
                lock.unlock();
                // An exception must not end the daemon from a thread of
                // its own (std::terminate): the next tick tries again.
                try {
                    fn();
                } catch (const std::exception& e) {
                    spdlog::error("a periodic task failed: {}", e.what());
                }
                lock.lock();
                cv_.wait_for(lock, period, [this] { return stop_; });
            }
        });
    }
    Ticker(const Ticker&) = delete;
    Ticker& operator=(const Ticker&) = delete;
    ~Ticker() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable())
            thread_.join();
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

} // namespace migd
